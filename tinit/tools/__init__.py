"""The tools around the library: the ``tinit`` command line, the report, ``python -m tinit.tools.info``
and the toy models they build. Nothing here is part of the initialisation API (``tinit``).

Modules:
    cli          the ``tinit`` console script (``init``, ``report`` and ``info`` sub-commands)
    cli_models   the models ``tinit init`` builds (toy GPT-2, Hugging Face by family, a config file)
    hf_families  Hugging Face families built small on the meta device
    info         which backends can run here and why not, the build, the devices
    report       step-zero variance and gradients against depth, per scheme (``tinit.report``)
    toy_models   the toy transformers: GPT-2 small for ``tinit init``, the configurable stack of the report
"""

# The tools' old module paths, kept one release as deprecated aliases: {old: new}. Docs name the new ones.
MOVED = {
    "tinit.cli": "tinit.tools.cli",
    "tinit.cli_models": "tinit.tools.cli_models",
    "tinit.hf_families": "tinit.tools.hf_families",
    "tinit.info": "tinit.tools.info",
    "tinit.models": "tinit.tools.toy_models",
    "tinit.report_models": "tinit.tools.toy_models",
}
