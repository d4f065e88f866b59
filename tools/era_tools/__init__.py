"""era's Python tools: HF LLaVA checkpoints to era bundles, test checkpoints, benchmark references.

Commands (each module has a main(argv=None); see tools/pyproject.toml's [project.scripts]):
  era_tools.export_llava            checkpoint folder -> bundle
  era_tools.make_tiny_llava         seeded random-weight test checkpoint
  era_tools.make_random_bundle      random-weight bundle at real model sizes
  era_tools.bench_python_reference  eager PyTorch timing reference for era_bench
Library: safetensors_io, hf_checkpoint, llava_model, prompt_template.
"""
