"""Split images into ViT patches and back.

As in the ViT paper (fig. 2), an image is cut into a grid of ``patch x patch``
squares; each square becomes one token by flattening it in (C, p, p) order.
Patches are numbered row by row, left to right.
"""

from __future__ import annotations

import numpy as np
import torch


def patch_grid(height: int, width: int, patch: int) -> tuple[int, int]:
    """Number of patch rows and columns; ValueError if the image does not tile exactly."""
    if patch <= 0:
        raise ValueError(f"patch size must be positive, got {patch}")
    if height % patch or width % patch:
        raise ValueError(
            f"image size {height}x{width} is not divisible by patch size {patch}; "
            f"choose a patch size that divides both height and width"
        )
    return height // patch, width // patch


def patchify(images: torch.Tensor, patch: int) -> torch.Tensor:
    """[B, C, H, W] -> [B, N, C*patch*patch], patches in row-major grid order."""
    batch, channels, height, width = images.shape
    rows, cols = patch_grid(height, width, patch)
    grid = images.reshape(batch, channels, rows, patch, cols, patch)
    grid = grid.permute(0, 2, 4, 1, 3, 5)  # B, rows, cols, C, p, p
    return grid.reshape(batch, rows * cols, channels * patch * patch)


def unpatchify(
    patches: torch.Tensor, patch: int, channels: int, height: int, width: int
) -> torch.Tensor:
    """Exact inverse of :func:`patchify`: [B, N, C*patch*patch] -> [B, C, H, W]."""
    rows, cols = patch_grid(height, width, patch)
    batch, count, dim = patches.shape
    if count != rows * cols or dim != channels * patch * patch:
        raise ValueError(
            f"patches of shape {tuple(patches.shape)} do not fit a {channels}x{height}x{width} "
            f"image with patch size {patch} "
            f"(expected [B, {rows * cols}, {channels * patch * patch}])"
        )
    grid = patches.reshape(batch, rows, cols, channels, patch, patch)
    grid = grid.permute(0, 3, 1, 4, 2, 5)  # B, C, rows, p, cols, p
    return grid.reshape(batch, channels, height, width)


IMAGE_NORM_EPS = 0.05**2  # about a 13-step spread of 0-255 values: a flat image's pixel noise stays small


def image_standardise(images: torch.Tensor, eps: float = IMAGE_NORM_EPS) -> torch.Tensor:
    """[B, C, H, W] -> [B, C, H, W]: each image's colour channels standardised over its own pixels,

        x'_c = (x_c - mean_c) / sqrt(var_c + eps)

    TokenNorm's formula (seed 001 §2.3) with the pixels of one channel in place of a token's features, and no γ, β.
    A shape is a shape in any colours: after this a red square on green and a white one on black differ only in
    the signs of their channels, so a small vision transformer need not learn every colour pair from examples."""
    mean = images.mean(dim=(2, 3), keepdim=True)  # [B, C, 1, 1]
    variance = images.var(dim=(2, 3), keepdim=True, unbiased=False)
    return (images - mean) / torch.sqrt(variance + eps)


def images_to_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 [B, H, W, 3] images -> float32 tensor [B, 3, H, W] scaled to [0, 1]."""
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(
            f"expected uint8 images of shape [B, H, W, 3], got {images.dtype} {images.shape}"
        )
    return torch.tensor(images).permute(0, 3, 1, 2).float().div(255.0)


def mask_to_patch_fraction(mask: np.ndarray, patch: int) -> np.ndarray:
    """Fraction of each patch's pixels that lie on the object, in patch order [rows*cols]."""
    height, width = mask.shape
    rows, cols = patch_grid(height, width, patch)
    blocks = mask.reshape(rows, patch, cols, patch)
    return blocks.mean(axis=(1, 3), dtype=np.float64).ravel()
