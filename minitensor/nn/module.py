"""Module and Parameter: the bookkeeping every layer shares.

A Module finds its parameters and submodules from its attributes, as in
PyTorch: assigning a Parameter or a Module to `self.something` registers it.
"""

import os
import re
import zipfile
from collections.abc import Mapping

import numpy as np

from ..autograd import no_grad
from ..tensor import Tensor
from ..views import increment_version, share_version


class Parameter(Tensor):
    """A Tensor that is a learnable weight of a Module (requires_grad=True).

    Parameter(array) keeps the array's dtype; Parameter(tensor) shares its data and its
    version counter, as detach() does (and as torch.nn.Parameter does): an in-place change of
    the tensor is an in-place change of the parameter, seen by every node that saved it.
    """

    __slots__ = ()

    def __init__(self, data, requires_grad=True):
        array = data.data if isinstance(data, Tensor) else np.asarray(data)
        super().__init__(array, requires_grad=requires_grad)
        if isinstance(data, Tensor):
            self.data = data.data  # share, do not copy
            share_version(self, data)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Module:
    """Base class of every layer and model. Subclasses define forward(...)."""

    def __init__(self):
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    # -- registration ---------------------------------------------------------

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)

    def __getattr__(self, name):
        # only called when normal lookup fails: look in the registries
        for registry in ("_parameters", "_modules"):
            found = self.__dict__.get(registry, {})
            if name in found:
                return found[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __delattr__(self, name):
        for registry in (self._parameters, self._modules):
            if name in registry:
                del registry[name]
                return
        object.__delattr__(self, name)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    # -- walking the tree -----------------------------------------------------

    def named_modules(self, prefix=""):
        """(name, module) for this module and every submodule, each once."""
        seen = set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            children = list(module._modules.items())
            for child_name, child in reversed(children):
                stack.append((f"{name}.{child_name}" if name else child_name, child))

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def children(self):
        return iter(self._modules.values())

    def named_parameters(self, remove_duplicate=True):
        """(name, parameter) pairs; a parameter shared by two modules (tied weights)
        is yielded once, under its first name, as in PyTorch."""
        seen = set()
        for module_name, module in self._all_modules_with_duplicates():
            for name, parameter in module._parameters.items():
                if remove_duplicate and id(parameter) in seen:
                    continue
                seen.add(id(parameter))
                yield (f"{module_name}.{name}" if module_name else name), parameter

    def _all_modules_with_duplicates(self, prefix=""):
        yield prefix, self
        for name, child in self._modules.items():
            yield from child._all_modules_with_duplicates(f"{prefix}.{name}" if prefix else name)

    def parameters(self):
        for _, parameter in self.named_parameters():
            yield parameter

    def num_parameters(self):
        """How many numbers the parameters hold (tied weights counted once)."""
        return sum(p.size for p in self.parameters())

    # -- modes and gradients --------------------------------------------------

    def train(self, mode=True):
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self):
        for parameter in self.parameters():
            parameter.grad = None

    def to(self, target):
        """Convert every parameter in place to a dtype (or move it: "numpy" / "cupy")."""
        with no_grad():
            for parameter in self.parameters():
                parameter.data = parameter.to(target).data
                parameter.grad = None
        return self

    # -- checkpoints ------------------------------------------------------------

    def state_dict(self):
        """{name: a copy of the array} for every parameter name (tied weights under each name)."""
        return {name: p.data.copy() for name, p in self.named_parameters(remove_duplicate=False)}

    def load_state_dict(self, state, strict=True):
        """Copy arrays into the parameters. Every key and value is checked first: a misshapen
        key, a value that is not numbers of a kind the parameter can hold, and (with
        strict=True) a missing or unexpected key raise one RuntimeError listing them all,
        and nothing is changed. Returns (missing, unexpected)."""
        model = type(self).__name__
        if not isinstance(state, Mapping):
            raise TypeError(
                f"load_state_dict for {model}: expected a dict of name -> array (what state_dict() "
                f"returns), got {type(state).__name__}"
            )
        own = dict(self.named_parameters(remove_duplicate=False))
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own))
        arrays = {name: _as_checkpoint_array(state[name]) for name in own if name in state}
        misshapen = sorted(
            f"{name}: checkpoint {tuple(array.shape)}, model {own[name].shape}"
            for name, array in arrays.items()
            if tuple(array.shape) != own[name].shape
        )
        wrong_kind = sorted(
            f"{name}: checkpoint dtype {array.dtype}, model {own[name].dtype}"
            for name, array in arrays.items()
            if array.dtype.kind not in "biuf" or not np.can_cast(array.dtype, own[name].dtype, "same_kind")
        )
        if misshapen or wrong_kind or (strict and (missing or unexpected)):
            problems = []
            if missing:
                problems.append(f"missing keys: {', '.join(missing)}")
            if unexpected:
                problems.append(f"unexpected keys: {', '.join(unexpected)}")
            if misshapen:
                problems.append(f"misshapen keys: {'; '.join(misshapen)}")
            if wrong_kind:
                problems.append(f"values of a dtype the parameter cannot hold: {'; '.join(wrong_kind)}")
            raise RuntimeError(f"load_state_dict for {model}: nothing was loaded. " + ". ".join(problems))
        with no_grad():
            for name, array in arrays.items():
                np.copyto(own[name].data, array, casting="same_kind")
                increment_version(own[name])
        return missing, unexpected

    def save(self, path):
        """Write the parameters to an .npz file atomically: a temporary file beside `path`,
        named after it (`.NAME.tmp-PID.npz`), renamed over `path` only once it is complete.
        A temporary left by a process killed while saving is removed by the next save of
        the same path."""
        path = os.fspath(path)
        folder, target = os.path.split(os.path.abspath(path))
        _remove_stale_temporaries(folder, target)
        temporary = os.path.join(folder, f".{target}.tmp-{os.getpid()}.npz")
        try:
            with open(temporary, "wb") as file:
                np.savez(file, **self.state_dict())
            os.replace(temporary, path)
        except BaseException:
            if os.path.exists(temporary):
                os.remove(temporary)
            raise

    def load(self, path, strict=True):
        """Read an .npz written by save() (no pickle is ever loaded) into the parameters."""
        path = os.fspath(path)
        with open(path, "rb") as file:
            start = file.read(4)
        if not start.startswith(b"PK"):  # an .npz is a zip archive; np.load would take anything else for a pickle
            raise ValueError(
                f"Module.load: {path} is not a minitensor checkpoint (an .npz archive written by "
                f"Module.save); the file starts with {start!r}, not a zip archive's 'PK'"
            )
        try:
            with np.load(path, allow_pickle=False) as archive:
                state = {name: archive[name] for name in archive.files}
        except zipfile.BadZipFile as error:  # cut short by a copy or a download, not by save()
            raise ValueError(f"Module.load: {path} is a damaged or incomplete .npz archive ({error})") from None
        return self.load_state_dict(state, strict=strict)

    # -- printing ---------------------------------------------------------------

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, child in self._modules.items():
            child_lines = repr(child).splitlines()
            lines.append(f"  ({name}): " + "\n  ".join(child_lines))
        if len(lines) == 1:
            return lines[0] + ")"
        return "\n".join(lines) + "\n)"


# ----------------------------------------------------------------------------
# Checkpoint helpers
# ----------------------------------------------------------------------------


def _as_checkpoint_array(value):
    """A checkpoint value as an array: Tensors give their data, PyTorch tensors their values as a
    NumPy array (so load_state_dict(torch_module.state_dict()) works, the dtypes then checked as
    any array's), arrays stay as they are (NumPy or CuPy), anything else goes through np.asarray."""
    if isinstance(value, Tensor):
        return value.data
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):  # a PyTorch state dict's tensor
        try:
            return value.detach().cpu().numpy()
        except TypeError as error:  # bfloat16 and the like have no NumPy dtype
            raise TypeError(f"load_state_dict: a PyTorch tensor of dtype {value.dtype} has no NumPy dtype "
                            f"({error}); convert it first, e.g. t.float()") from None
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return value
    return np.asarray(value)


def _remove_stale_temporaries(folder, target):
    """Delete `.TARGET.tmp-PID.npz` files whose process is gone: a save killed before its
    rename (a running process's temporary is left alone, it may be saving right now)."""
    pattern = re.compile(rf"\.{re.escape(target)}\.tmp-(\d+)\.npz")
    for entry in os.listdir(folder):
        match = pattern.fullmatch(entry)
        if match and int(match.group(1)) != os.getpid() and not _process_exists(int(match.group(1))):
            try:
                os.remove(os.path.join(folder, entry))
            except FileNotFoundError:  # another save removed it first
                pass


def _process_exists(pid):
    """Whether a process with this id is running (POSIX). Elsewhere we cannot ask cheaply
    (on Windows, os.kill(pid, 0) sends Ctrl+C instead of asking), so every other temporary
    counts as stale."""
    if os.name != "posix":
        return False
    try:
        os.kill(pid, 0)  # signal 0: checks the process exists, sends nothing
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists but belongs to another user
        return True
    return True
