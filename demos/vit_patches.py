# %% [markdown]
# # A vision transformer's input (seed 000, "Vision transformers").
#
# A real photograph (matplotlib's sample image) cut into 7 x 7 patches of 32 x 32 pixels for the
# figure; ViT's own input is 14 x 14 patches of 16 x 16. The patch embedding is a convolution
# whose kernel size and stride equal the patch size; it equals one linear map applied to every
# flattened patch. ViT-Tiny's: tokens (1, 196, 192), 147,648 parameters.

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
    print("equals PyTorch's Conv2d: (PyTorch is not installed; skipped)")
print("tokens:", tokens.shape, "; parameters of the patch embedding:", embed.num_parameters())
checks("tokens (1, 196, 192)", tokens.shape == (1, 196, 192))
checks("147,648 parameters", embed.num_parameters() == 147_648)

# %% [markdown]
# The figure: the photograph cut into 7 x 7 patches of 32 x 32, and the sequence they become

# %%
grid = patches(mt.tensor(image[None]), 32).data[0].reshape(49, 3, 32, 32)
fig = plt.figure(figsize=(13, 5.2), layout="constrained")
left, right = fig.subfigures(1, 2, width_ratios=[1, 1.6])
ax = left.subplots()
ax.imshow(image.transpose(1, 2, 0))
for k in range(1, 7):
    ax.axhline(32 * k - 0.5, color="w", lw=1)
    ax.axvline(32 * k - 0.5, color="w", lw=1)
ax.set(title="224 x 224 photograph, 7 x 7 patches of 32 x 32", xticks=[], yticks=[])
cells = right.subplots(4, 13)
right.suptitle("the sequence of patches (raster order), each flattened to 3 x 32 x 32 = 3,072 numbers")
for index, cell in enumerate(cells.flat):
    cell.axis("off")
    if index < 49:
        cell.imshow(grid[index].transpose(1, 2, 0))
        cell.set_title(str(index + 1), fontsize=7)
save(fig, "vit_patches")
