"""The eager reference model of the logit / NeXT / pruning fixtures: era_tools.llava_model's
modules in float32 with the decoder in "explicit" mode (no KV cache, the plain attention formula),
and the splice of the projected image rows into the prompt's text embeddings."""
import torch

from era_tools.llava_model import build_decoder, build_projector, build_vision


def build_eager_modules(ckpt):
    """The eager float32 reference: vision tower, projector and the explicit-formula decoder."""
    return (build_vision(ckpt, torch.float32), build_projector(ckpt, torch.float32),
            build_decoder(ckpt, torch.float32, attention="explicit"))


def splice_image(decoder, ids, image_token_id, image_rows):
    """Text embeddings with the one image placeholder replaced by image_rows [1, N, D]
    -> (embeds [1, L, D], placeholder position)."""
    p_img = ids.index(image_token_id)
    text_emb = decoder.embed(torch.tensor([ids], dtype=torch.int64))
    embeds = torch.cat([text_emb[:, :p_img], image_rows.to(text_emb.dtype), text_emb[:, p_img + 1:]],
                       dim=1)
    return embeds, p_img
