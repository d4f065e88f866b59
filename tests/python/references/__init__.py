"""The independent Python references the C++ side is tested against, and the fixture helpers the
tests/python scripts share. Test code only: the era_tools package never imports it.

  pil_reference      Pillow image preprocessing (LLaVA-1.5 "pad" path), as HF's CLIPImageProcessor
  anyres_reference   LLaVA-NeXT anyres preprocessing and packing, as HF's LlavaNext
  prompt_reference   vicuna_v1 prompt and tokenizer_image_token, as original LLaVA
  eager_llava        the eager float32 reference model (explicit decoder) and the image splice
  fixture_files      .npy / .json writers with the fixtures' conventions
  synthetic_image    seeded synthetic test images
"""
