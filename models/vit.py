"""The vision transformer's patch embedding: cut the image into P x P patches, flatten each,
map it linearly to width d. Equal to PyTorch's Conv2d(C, d, kernel_size=P, stride=P)."""

from minitensor.nn import Linear, Module, Parameter


def patches(images, patch):
    """(B, C, H, W) -> (B, N, C*P*P): N = (H/P)(W/P) patches, row by row, each flattened
    in (channel, row, column) order, the order of a Conv2d kernel."""
    B, C, H, W = images.shape
    if H % patch or W % patch:
        raise ValueError(f"patches: image size {H}x{W} is not a multiple of the patch size {patch}")
    grid = images.reshape(B, C, H // patch, patch, W // patch, patch)  # (B, C, H, W) -> (B, C, gh, P, gw, P)
    grid = grid.permute(0, 2, 4, 1, 3, 5)  # (B, C, gh, P, gw, P) -> (B, gh, gw, C, P, P)
    return grid.reshape(B, (H // patch) * (W // patch), C * patch * patch)  # -> (B, gh * gw, C * P * P)


class PatchEmbedding(Module):
    """PatchEmbedding(patch=16, channels=3, d=192): ViT-Tiny's has 3*16*16*192 + 192 = 147,648 parameters."""

    def __init__(self, patch=16, channels=3, d=192):
        super().__init__()
        self.patch = patch
        self.project = Linear(channels * patch * patch, d)

    def forward(self, images):
        return self.project(patches(images, self.patch))  # (B, N, d)

    @classmethod
    def from_torch(cls, conv):
        """Copy a Conv2d(C, d, kernel_size=P, stride=P): its (d, C, P, P) kernel is our (d, C*P*P) matrix."""
        d, C, P, _ = conv.weight.shape
        ours = cls(P, C, d)
        ours.project.weight = Parameter(conv.weight.detach().numpy().reshape(d, C * P * P).copy())  # -> (d, C*P*P)
        ours.project.bias = Parameter(conv.bias.detach().numpy().copy())
        return ours
