#!/usr/bin/env python3
"""Write a single-layer container image tar, offline and deterministically.

No registry, docker or buildah: the image is assembled from local files and
written as a docker-archive (what `docker save` writes and
`ctr -n k8s.io images import` reads), an OCI image layout tar, or both in one
tar. The same inputs always give the same bytes (sorted entries, owner 0:0,
mtime SOURCE_DATE_EPOCH or 0), hence the same image ID.

Contents (each option repeatable, applied in command-line order, so a later
entry replaces an earlier one at the same path; missing parent directories
are added with mode 0755; the libraries of --bin come after all of them):
  --file DEST SRC       SRC's content (symlinks followed) at DEST, SRC's mode bits
  --bin DEST SRC        an executable (0755) plus every shared library `ldd`
                        lists for it and the ELF loader, at the paths ldd prints
  --tree DEST SRCDIR    a directory tree (symlinks kept as symlinks)
  --dir DEST            an empty directory (0755)
  --symlink DEST TARGET a symbolic link
  --chmod MODE DEST     set the mode of an entry (octal, e.g. 1777), applied last
Config: --entrypoint, --cmd (a JSON list, or one word), --env K=V, --workdir,
--user, --label K=V, --arch (default amd64).

Example (the busybox image of scripts/setup-k8s.sh is built the same way):
  mkimage.py -o sarena.tar -t sarena.local/sarena:dev \\
      --bin /usr/bin/sarena-daemon target/release/sarena-daemon \\
      --file /opt/cni/bin/sarena-cni target/release/sarena-cni \\
      --dir /tmp --chmod 1777 /tmp --entrypoint /usr/bin/sarena-daemon

Libraries loaded with dlopen (NSS modules, plugins) are invisible to ldd: add
them with --file.
"""
import argparse
import hashlib
import io
import json
import os
import re
import stat
import subprocess
import sys
import tarfile
import time

DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


class ImageError(Exception):
    """A bad argument or input file; reported as one line, exit status 2."""


def inner_path(dest):
    """DEST as a relative, normalised path inside the image ('usr/bin/x')."""
    norm = os.path.normpath("/" + dest).lstrip("/")
    if norm in ("", "."):
        raise ImageError(f"{dest!r} is not a path inside the image")
    return norm


class Rootfs:
    """The entries of the one layer, by path: (kind, source or target, mode)."""

    def __init__(self):
        self.entries = {}

    def _parents(self, path):
        parts = path.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            kind = self.entries.get(parent, ("dir",))[0]
            if kind != "dir":
                raise ImageError(f"/{parent} is a {kind}, cannot hold /{path}")
            self.entries.setdefault(parent, ("dir", None, 0o755))

    def put(self, dest, kind, payload, mode):
        path = inner_path(dest)
        self._parents(path)
        old = self.entries.get(path)
        if old and old[0] == "dir" and kind == "dir":
            mode = mode if mode is not None else old[2]
        self.entries[path] = (kind, payload, 0o755 if mode is None else mode)
        return path

    def add_file(self, dest, src, mode=None):
        real = os.path.realpath(src)
        if not os.path.isfile(real):
            raise ImageError(f"{src}: not a regular file")
        if mode is None:
            mode = stat.S_IMODE(os.stat(real).st_mode)
        self.put(dest, "file", real, mode)
        return real

    def add_tree(self, dest, srcdir):
        if not os.path.isdir(srcdir):
            raise ImageError(f"{srcdir}: not a directory")
        if os.path.normpath("/" + dest) != "/":
            self.put(dest, "dir", None, stat.S_IMODE(os.stat(srcdir).st_mode))
        for top, dirs, files in os.walk(srcdir):
            rel = os.path.relpath(top, srcdir)
            for name in sorted(dirs) + sorted(files):
                full = os.path.join(top, name)
                inside = os.path.join(dest, rel, name)
                if os.path.islink(full):
                    self.put(inside, "symlink", os.readlink(full), 0o777)
                elif os.path.isdir(full):
                    self.put(inside, "dir", None, stat.S_IMODE(os.stat(full).st_mode))
                elif os.path.isfile(full):
                    self.add_file(inside, full)
                else:
                    raise ImageError(f"{full}: neither file, directory nor symlink")

    def chmod(self, mode, dest):
        path = inner_path(dest)
        if path not in self.entries:
            raise ImageError(f"--chmod {dest}: no such entry")
        kind, payload, _ = self.entries[path]
        self.entries[path] = (kind, payload, mode)

    def layer_tar(self, mtime):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(self.entries):
                kind, payload, mode = self.entries[path]
                info = tarfile.TarInfo(path)
                info.mode, info.mtime = mode, mtime
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                if kind == "file":
                    with open(payload, "rb") as f:
                        data = f.read()
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                else:
                    info.type = tarfile.DIRTYPE if kind == "dir" else tarfile.SYMTYPE
                    if kind == "symlink":
                        info.linkname = payload
                    tar.addfile(info)
        return buf.getvalue()


LDD_LINE = re.compile(r"^\s*(?:\S+\s+=>\s+)?(/\S+)\s+\(0x[0-9a-f]+\)$")


def shared_libraries(binary):
    """Absolute paths of the libraries (and loader) `ldd` lists; [] if static."""
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=False)
    except OSError as e:
        raise ImageError(f"cannot run ldd: {e}") from e
    if out.returncode != 0:
        if "not a dynamic executable" in out.stdout + out.stderr:
            return []
        raise ImageError(f"ldd {binary}: {out.stderr.strip() or out.stdout.strip()}")
    libs = []
    for line in out.stdout.splitlines():
        if "not found" in line:
            raise ImageError(f"{binary}: library not found: {line.strip()}")
        m = LDD_LINE.match(line)
        if m:
            libs.append(m.group(1))
    return libs


def reference_name(tag):
    """The full name containerd gives TAG (docker.io/library/x:latest style)."""
    name, sep, digest = tag.partition("@")
    first, slash, _ = name.partition("/")
    if not slash or ("." not in first and ":" not in first and first != "localhost"):
        name = "docker.io/" + ("library/" + name if not slash else name)
    if not sep and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name + (sep + digest if sep else "")


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def json_bytes(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def argv_value(text):
    if text is None:
        return None
    if text.lstrip().startswith("["):
        value = json.loads(text)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ImageError(f"{text!r}: want a JSON list of strings")
        return value
    return [text]


def image_config(args, layer_digest, created):
    cfg = {"Env": args.env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}
    for key, value in (("Entrypoint", argv_value(args.entrypoint)), ("Cmd", argv_value(args.cmd)),
                       ("WorkingDir", args.workdir), ("User", args.user)):
        if value is not None:
            cfg[key] = value
    if args.label:
        cfg["Labels"] = dict(kv.split("=", 1) for kv in args.label)
    return {
        "architecture": args.arch, "os": "linux", "created": created, "config": cfg,
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + layer_digest]},
        "history": [{"created": created, "created_by": "scripts/mkimage.py"}],
    }


def archive_members(args, layer, config):
    """(name, bytes) of the output tar, in order, for --format."""
    layer_hex, config_hex = sha256(layer), sha256(config)
    members = []
    if args.format in ("oci", "both"):
        manifest = json_bytes({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": "sha256:" + config_hex, "size": len(config)},
            "layers": [{"mediaType": OCI_LAYER, "digest": "sha256:" + layer_hex, "size": len(layer)}],
        })
        index = json_bytes({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": "sha256:" + sha256(manifest), "size": len(manifest),
             "annotations": {"io.containerd.image.name": reference_name(tag),
                             "org.opencontainers.image.ref.name": tag.rsplit(":", 1)[-1]}}
            for tag in args.tag]})
        members += [("oci-layout", json_bytes({"imageLayoutVersion": "1.0.0"})),
                    ("index.json", index), ("blobs/sha256/" + sha256(manifest), manifest)]
    members += [("blobs/sha256/" + config_hex, config), ("blobs/sha256/" + layer_hex, layer)]
    if args.format in ("docker", "both"):
        members.append(("manifest.json", json_bytes([{
            "Config": "blobs/sha256/" + config_hex, "RepoTags": args.tag,
            "Layers": ["blobs/sha256/" + layer_hex]}])))
    return members


def write_archive(path, members, mtime):
    tmp = f"{path}.tmp{os.getpid()}"
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, mtime
            tar.addfile(info)
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, mtime
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, path)


def octal(text):
    try:
        return int(text, 8)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not an octal mode") from e


class InOrder(argparse.Action):
    """Collects the content options in command-line order: (flag, values)."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.content.append((option_string, values))


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", required=True, help="the image tar to write")
    ap.add_argument("-t", "--tag", action="append", required=True, help="image name, e.g. sarena.local/x:dev")
    ap.add_argument("--format", choices=("docker", "oci", "both"), default="docker",
                    help="docker-archive (default), OCI layout, or both in one tar")
    ap.set_defaults(content=[])
    for flag, nargs, metavar in (("--file", 2, ("DEST", "SRC")), ("--bin", 2, ("DEST", "SRC")),
                                 ("--tree", 2, ("DEST", "SRCDIR")), ("--dir", 1, "DEST"),
                                 ("--symlink", 2, ("DEST", "TARGET"))):
        ap.add_argument(flag, nargs=nargs, metavar=metavar, action=InOrder)
    ap.add_argument("--chmod", nargs=2, action="append", default=[], metavar=("MODE", "DEST"))
    ap.add_argument("--entrypoint")
    ap.add_argument("--cmd")
    ap.add_argument("--env", action="append", default=[], metavar="K=V")
    ap.add_argument("--workdir")
    ap.add_argument("--user")
    ap.add_argument("--label", action="append", default=[], metavar="K=V")
    ap.add_argument("--arch", default="amd64")
    return ap.parse_args(argv)


def build(args):
    rootfs = Rootfs()
    libraries = set()
    for flag, values in args.content:
        if flag == "--file":
            rootfs.add_file(*values)
        elif flag == "--bin":
            libraries.update(shared_libraries(rootfs.add_file(*values, 0o755)))
        elif flag == "--tree":
            rootfs.add_tree(*values)
        elif flag == "--dir":
            rootfs.put(values[0], "dir", None, None)
        else:
            rootfs.put(values[0], "symlink", values[1], 0o777)
    for lib in sorted(libraries):
        if inner_path(lib) not in rootfs.entries:
            rootfs.add_file(lib, lib)
    for mode, dest in args.chmod:
        rootfs.chmod(octal(mode), dest)

    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    layer = rootfs.layer_tar(epoch)
    config = json_bytes(image_config(args, sha256(layer), created))
    write_archive(args.output, archive_members(args, layer, config), epoch)
    print(f"mkimage: {args.output}: {', '.join(args.tag)}, {len(rootfs.entries)} entries "
          f"({len(libraries)} libraries from ldd), image id sha256:{sha256(config)}")


def main(argv=None):
    args = parse_args(argv)
    try:
        build(args)
    except (ImageError, OSError, ValueError) as e:
        print(f"mkimage: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
