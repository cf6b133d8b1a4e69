# %% [markdown]
# # A vision transformer's input (seed 000, "Vision transformers").
#
# A real photograph (matplotlib's sample image), 224 x 224, cut as ViT cuts it: 14 x 14 = 196
# patches of 16 x 16, the tokens the checks below count (with ViT's class token, 197). The
# chapter's figure cuts its image into 7 x 7 patches of 32 x 32 "for legibility"; ours draws the
# 196 patches themselves, so that the figure shows what the checks count. The patch embedding is
# a convolution whose kernel size and stride equal the patch size; it equals one linear map
# applied to every flattened patch. ViT-Tiny's: tokens (1, 196, 192), 147,648 parameters.

# %%
import numpy as np
from matplotlib import cbook
from PIL import Image

import minitensor as mt
from models.vit import PatchEmbedding, patches

from demos._common import Checks, plt, save


def photograph(size=224):
    """matplotlib's sample photograph, cropped square and resized, as (3, size, size) in [0, 1]."""
    with cbook.get_sample_data("grace_hopper.jpg") as file:
        image = Image.open(file).convert("RGB")
    side = min(image.size)
    image = image.crop((0, 0, side, side)).resize((size, size), Image.BICUBIC)
    return np.asarray(image, dtype=np.float64).transpose(2, 0, 1) / 255.0


def strided_convolution(image, kernel, bias, stride):
    """The definition of a convolution with stride = kernel size: slide, multiply, sum."""
    d, C, P, _ = kernel.shape
    rows, cols = image.shape[1] // stride, image.shape[2] // stride
    out = np.empty((d, rows, cols))
    for i in range(rows):
        for j in range(cols):
            window = image[:, i * stride : i * stride + P, j * stride : j * stride + P]
            out[:, i, j] = np.tensordot(kernel, window, axes=3) + bias
    return out


# %%
checks = Checks()
image = photograph()
P, d = 16, 192
mt.manual_seed(0)
embed = PatchEmbedding(patch=P, channels=3, d=d).to(np.float64)
tokens = embed(mt.tensor(image[None])).data  # (1, 196, 192): a linear map of flattened patches
kernel = embed.project.weight.data.reshape(d, 3, P, P)  # the same numbers as a conv kernel
conv = strided_convolution(image, kernel, embed.project.bias.data, P)  # (d, 14, 14)
checks("strided convolution = linear map of flattened patches", np.allclose(tokens[0], conv.reshape(d, -1).T, atol=1e-10))
try:
    import torch

    torch_conv = torch.nn.Conv2d(3, d, kernel_size=P, stride=P).double()
    with torch.no_grad():
        torch_conv.weight.copy_(torch.from_numpy(kernel))
        torch_conv.bias.copy_(torch.from_numpy(embed.project.bias.data))
    theirs = torch_conv(torch.from_numpy(image[None])).flatten(2).transpose(1, 2).detach().numpy()
    checks("equals PyTorch's Conv2d(3, 192, kernel_size=16, stride=16)", np.allclose(tokens, theirs, atol=1e-10))
except ImportError:
    checks.skip("equals PyTorch's Conv2d(3, 192, kernel_size=16, stride=16)", "PyTorch is not installed")
print("tokens:", tokens.shape, "; parameters of the patch embedding:", embed.num_parameters())
checks("tokens (1, 196, 192)", tokens.shape == (1, 196, 192))
checks("147,648 parameters", embed.num_parameters() == 147_648)

# %% [markdown]
# The figure: the photograph cut into the 196 patches of 16 x 16, and the sequence they become

# %%
grid = patches(mt.tensor(image[None]), P).data[0].reshape(-1, 3, P, P)  # (196, 3, 16, 16): the tokens' patches
print(f"the figure's patches: {len(grid)} of {P} x {P}; with the class token, {len(grid) + 1} tokens (the chapter: 197)")
checks("the figure draws the 196 patches the tokens are made of", len(grid) == tokens.shape[1] == 196)
per_row, gap = 14, 4  # the sequence in lines of 14 patches (raster order), 4 white pixels apart
rows = len(grid) // per_row
strip = np.ones((rows * (P + gap), per_row * (P + gap), 3))
for index, patch in enumerate(grid):
    row, col = divmod(index, per_row)
    strip[row * (P + gap) : row * (P + gap) + P, col * (P + gap) : col * (P + gap) + P] = patch.transpose(1, 2, 0)
fig = plt.figure(figsize=(13, 6), layout="constrained")
left, right = fig.subfigures(1, 2, width_ratios=[1, 1.1])
ax = left.subplots()
ax.imshow(image.transpose(1, 2, 0))
side = image.shape[1] // P
for k in range(1, side):
    ax.axhline(P * k - 0.5, color="w", lw=0.6)
    ax.axvline(P * k - 0.5, color="w", lw=0.6)
ax.set(title=f"224 x 224 photograph, {side} x {side} = {side * side} patches of {P} x {P}", xticks=[], yticks=[])
ax = right.subplots()
ax.imshow(strip)
ax.set_yticks([row * (P + gap) + P / 2 for row in range(rows)], [f"{row * per_row + 1}-{(row + 1) * per_row}" for row in range(rows)])
ax.set_xticks([])
ax.set(ylabel="tokens (raster order)")
ax.set_title(f"the sequence of {len(grid)} tokens, in lines of {per_row}: each patch flattened to\n"
             f"3 x {P} x {P} = {3 * P * P} numbers, then mapped to d = {d}")
save(fig, "vit_patches")
