"""The tools around the library: the ``tinit`` command line, the report, ``python -m tinit.tools.info``
and the toy models they build. Nothing here is part of the initialisation API (``tinit``).

Modules:
    cli          the ``tinit`` console script (``init``, ``report`` and ``info`` sub-commands)
    cli_models   the models ``tinit init`` builds (toy GPT-2, Hugging Face by family, a config file)
    hf_families  Hugging Face families built small on the meta device
    info         which backends can run here and why not, the build, the devices
    memory       the bytes a meta model will take and the bytes this process may still allocate
    report       step-zero variance and gradients against depth, per scheme (``tinit.report``)
    toy_models   the toy transformers: GPT-2 small for ``tinit init``, the configurable stack of the report
"""

# The tools are the modules themselves; the package exports nothing of its own.
__all__: list[str] = []
