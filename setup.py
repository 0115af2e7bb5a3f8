"""Build hooks only (everything else is declared in setup.cfg): ship the start-up hook
``dgl_graphtx-graphbolt.pth`` into site-packages, in wheels and in editable installs alike, so that
``import dgl`` works before ``import dgl_graphtx`` (see dgl_graphtx/_dgl_env.py)."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

#: Read at interpreter start from site-packages; its name sorts after setuptools' editable finder.
HOOK = Path(__file__).parent / "dgl_graphtx-graphbolt.pth"


class BuildPyWithHook(build_py):
    """A wheel gets the hook at its root, next to the package (site-packages once installed)."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            self.copy_file(str(HOOK), str(Path(self.build_lib) / HOOK.name), preserve_mode=False)


class EditableWheelWithHook(editable_wheel):
    """An editable wheel gets the hook among the files it installs beside setuptools' finder."""

    def _install_namespaces(self, installation_dir: str, pth_prefix: str) -> None:
        super()._install_namespaces(installation_dir, pth_prefix)
        shutil.copyfile(HOOK, Path(installation_dir) / HOOK.name)


setup(cmdclass={"build_py": BuildPyWithHook, "editable_wheel": EditableWheelWithHook})
