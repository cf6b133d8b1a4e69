"""A student's code planted in a sandbox's copy and called through the worker's requests, as a
submission's own module would be: the tests of the sandbox attack it from there.

    answer = planted.call(worker, SOURCE, "probe_reach", (paths,), seconds=60)

The worker holds no test (worker.py): what a test wants run there is code of the copy's, so it
is written into the copy (the sandbox's code folder, with the ownership and mode of the copy's
own files) as a module of its own, imported and called by name."""

import hashlib
import os

from homework.worker import Handle


def call(worker, source, name, args=(), kwargs=None, seconds=60.0, last=False):
    """What the function `name` of `source`, planted in `worker`'s copy, returns for `args`."""
    code = worker.sandbox.code
    module = "planted_" + hashlib.sha256(source.encode()).hexdigest()[:12]
    path = code / f"{module}.py"
    if not path.exists():
        path.write_text(source)
        sibling = os.stat(code / "minitensor" / "__init__.py")
        os.chown(path, sibling.st_uid, sibling.st_gid)
        os.chmod(path, sibling.st_mode & 0o777)
    function = worker.ask({"do": "import", "module": module}, Handle, seconds=seconds)
    function = worker.ask({"do": "getattr", "of": function, "name": name}, Handle, seconds=seconds)
    return worker.ask({"do": "call", "of": function, "args": list(args), "kwargs": dict(kwargs or {})}, Handle,
                      seconds=seconds, last=last)
