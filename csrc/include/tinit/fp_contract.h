// Contraction off for everything compiled after this header, whatever the
// build line says (-ffp-contract=fast is GCC's C++ default, -O3 -march=native
// builds of distros and users fuse a*b + c into one fma and move values by an
// ulp). Include it first, before any other header, in every CPU or shared
// source. GCC ignores `#pragma STDC FP_CONTRACT` in C++ (and contracts
// through named temporaries), but honours the optimize pragma; Clang has its
// own. nvcc: the build passes --fmad=false, and the device steps whose fusion
// would change a value (tail_value's l - L, rescale's x * scale + 0) are
// spelled mul_rn / add_rn (__fmul_rn / __fadd_rn), which never fuse.
// tinit::cpu::self_test_failure checks at load time that it worked.
#pragma once

// TINIT_TEST_CONTRACTED_BUILD: no pragma, for the test that shows the
// self-test's known answers catch a contracted build; never set it otherwise.
#if !defined(__CUDACC__) && !defined(TINIT_TEST_CONTRACTED_BUILD)
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#endif
