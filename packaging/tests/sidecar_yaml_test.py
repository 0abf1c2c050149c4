#!/usr/bin/env python3
"""Offline check of packaging/container/sealfs-sidecar.yaml (no cluster).

1. Every document is checked field by field against the Kubernetes API models
   of the official Python client (PyPI `kubernetes`, in a venv made by
   tests/scenarios/scenario_venv.py): an unknown field name or a value of the
   wrong type fails; then ApiClient.deserialize builds the model, which fails
   on a missing required field or a value outside an enum the client checks.
2. The pod follows the layout that packaging/tests/container_test.sh runs for
   real under podman: the sidecar is privileged and mounts the shared volume
   with Bidirectional propagation, the app mounts only the view (the
   directory above the mount point) read-only with HostToContainer and runs
   as the uid that SEALFS_OWNER gives the backing directory; the pod shares
   one pid namespace, so that the sidecar sees the app's writers (R4).
3. The checker itself fails on planted mistakes: a misspelt field, a string
   where a bool belongs, a list where an object belongs.

Debian 12's python3-kubernetes (22.6) predates native sidecars (a container's
restartPolicy), hence the PyPI client. Outside CI, exits 77 (skipped) when the
venv cannot be made; with CI=true that fails.
usage: sidecar_yaml_test.py [YAML]
"""
from __future__ import annotations

import copy
import json
import os
import posixpath
import re
import subprocess
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[1]
DEFAULT_YAML = SOURCE / "packaging" / "container" / "sealfs-sidecar.yaml"
REQUIREMENTS = ["kubernetes==31.0.0"]
IN_VENV = "SEALFS_SIDECAR_YAML_IN_VENV"


def reexec_in_venv() -> None:
    sys.path.insert(0, str(SOURCE / "tests" / "scenarios"))
    import scenario_venv  # noqa: E402  (only outside the venv)

    try:
        python = scenario_venv.ensure_venv("kubernetes", REQUIREMENTS, "kubernetes.client")
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        if os.environ.get("CI") == "true":
            print(f"FAIL: CI must run this test, but the kubernetes client venv failed: {e}")
            sys.exit(1)
        print(f"skipped: cannot install {REQUIREMENTS[0]} from PyPI: {str(e).splitlines()[0]}")
        sys.exit(77)
    env = dict(os.environ, **{IN_VENV: "1"})
    os.execve(str(python), [str(python), __file__, *sys.argv[1:]], env)


# ---- the strict field check (runs inside the venv) ---------------------------

PRIMITIVES = {"str": (str,), "bool": (bool,), "int": (int,), "float": (int, float)}


class SchemaError(Exception):
    pass


def model_class(api_version: str, kind: str):
    """V1Pod for v1/Pod, V1DaemonSet for apps/v1/DaemonSet, ..."""
    import kubernetes.client as k

    version = api_version.rsplit("/", 1)[-1]
    name = version[:1].upper() + version[1:] + kind
    cls = getattr(k, name, None)
    if cls is None or not hasattr(cls, "openapi_types"):
        raise SchemaError(f"no model {name} for apiVersion {api_version} kind {kind}")
    return cls, name


def check_value(value, type_name: str, where: str) -> None:
    import kubernetes.client as k

    if value is None:
        return
    m = re.fullmatch(r"list\[(.+)\]", type_name)
    if m:
        if not isinstance(value, list):
            raise SchemaError(f"{where}: expected a list ({type_name}), got {type(value).__name__}")
        for i, item in enumerate(value):
            check_value(item, m.group(1), f"{where}[{i}]")
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if m:
        if not isinstance(value, dict):
            raise SchemaError(f"{where}: expected a map ({type_name}), got {type(value).__name__}")
        for key, item in value.items():
            if not isinstance(key, str):
                raise SchemaError(f"{where}: map key {key!r} is not a string")
            check_value(item, m.group(1), f"{where}.{key}")
        return
    if type_name == "object":  # IntOrString, quantities, raw JSON
        if not isinstance(value, (str, int, float, dict, list)) or isinstance(value, bool):
            raise SchemaError(f"{where}: unexpected {type(value).__name__}")
        return
    if type_name == "datetime":
        if not isinstance(value, str):
            raise SchemaError(f"{where}: expected a timestamp string")
        return
    if type_name in PRIMITIVES:
        allowed = PRIMITIVES[type_name]
        # YAML's true is a Python bool, which is also an int: keep them apart.
        if isinstance(value, bool) != (type_name == "bool") or not isinstance(value, allowed):
            raise SchemaError(f"{where}: expected {type_name}, got {type(value).__name__} {value!r}")
        return
    cls = getattr(k, type_name, None)
    if cls is None or not hasattr(cls, "openapi_types"):
        raise SchemaError(f"{where}: the client has no model {type_name}")
    check_object(value, cls, where)


def check_object(doc, cls, where: str) -> None:
    if not isinstance(doc, dict):
        raise SchemaError(f"{where}: expected an object ({cls.__name__}), got {type(doc).__name__}")
    by_json_name = {json_name: attr for attr, json_name in cls.attribute_map.items()}
    for key, value in doc.items():
        if key not in by_json_name:
            raise SchemaError(f"{where}: unknown field '{key}' in {cls.__name__}")
        check_value(value, cls.openapi_types[by_json_name[key]], f"{where}.{key}")


def check_document(doc: dict):
    """The model object of one document; raises SchemaError."""
    from kubernetes.client import ApiClient

    if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
        raise SchemaError("a document needs apiVersion and kind")
    cls, name = model_class(doc["apiVersion"], doc["kind"])
    check_object(doc, cls, doc["kind"])

    class Response:  # what ApiClient.deserialize reads
        data = json.dumps(doc)

    try:
        return ApiClient().deserialize(Response(), name)
    except (ValueError, TypeError) as e:
        raise SchemaError(f"{doc['kind']}: {e}") from e


def load_documents(path: Path) -> list:
    import yaml

    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# ---- the tests ----------------------------------------------------------------


def env_of(container) -> dict:
    return {e.name: e.value for e in (container.env or [])}


def volume_at(container, path: str):
    """The volumeMount whose mountPath holds `path` (the longest match)."""
    best = None
    for vm in container.volume_mounts or []:
        mp = vm.mount_path.rstrip("/")
        if (path == mp or path.startswith(mp + "/")) and (best is None or len(mp) > len(best.mount_path)):
            best = vm
    return best


class SidecarYaml(unittest.TestCase):
    yaml_path = DEFAULT_YAML

    @classmethod
    def setUpClass(cls):
        cls.docs = load_documents(cls.yaml_path)

    def test_every_document_matches_the_api_models(self):
        self.assertGreater(len(self.docs), 0)
        for doc in self.docs:
            with self.subTest(kind=doc.get("kind")):
                check_document(doc)

    def pod(self):
        pods = [check_document(d) for d in self.docs if d["kind"] == "Pod"]
        self.assertEqual(len(pods), 1, "one Pod")
        return pods[0]

    def test_layout_matches_the_podman_test(self):
        pod = self.pod()
        sidecars = [c for c in pod.spec.init_containers or [] if c.restart_policy == "Always"]
        self.assertEqual(len(sidecars), 1, "one native sidecar (init container, restartPolicy Always)")
        sidecar = sidecars[0]
        self.assertTrue(sidecar.security_context.privileged, "Bidirectional needs a privileged container")
        # R4: in-place writes need the app's processes in the daemon's pid
        # namespace (else pid 0, and the daemon refuses them) and read
        # access to their /proc (privileged includes CAP_SYS_PTRACE).
        self.assertTrue(pod.spec.share_process_namespace, "the sidecar must see the app's writers (R4)")
        env = env_of(sidecar)
        backing, view = env["SEALFS_BACKING"], env["SEALFS_MOUNTPOINT"]
        self.assertFalse(view == backing or view.startswith(backing + "/") or backing.startswith(view + "/"),
                         "the view must not overlap the backing directory")
        self.assertIn("allow_other", env["SEALFS_OPTIONS"].split(","), "the app runs as another uid")
        self.assertNotIn("auto_unmount", env["SEALFS_OPTIONS"].split(","),
                         "auto_unmount does not survive SIGKILL of the pid namespace")
        shared = volume_at(sidecar, view)
        self.assertIsNotNone(shared, "the mount point lies in one of the sidecar's volumes")
        self.assertEqual(shared.mount_propagation, "Bidirectional")
        self.assertIsNotNone(volume_at(sidecar, backing))
        probe = sidecar.startup_probe._exec.command  # "exec" is a keyword in the client
        self.assertEqual(probe[-3:-1], ["wait", view], "the startup probe waits for the mount")

        volumes = {v.name: v for v in pod.spec.volumes}
        shared_host = volumes[shared.name].host_path.path.rstrip("/")
        host_view = posixpath.join(shared_host, posixpath.relpath(view, shared.mount_path))
        host_backing = posixpath.join(shared_host, posixpath.relpath(backing, shared.mount_path))
        owner = env.get("SEALFS_OWNER", "")
        self.assertRegex(owner, r"^\d+(:\d+)?$", "the backing directory is given to the app's uid")

        self.assertEqual(len(pod.spec.containers), 1)
        app = pod.spec.containers[0]
        self.assertFalse(app.security_context.privileged)
        self.assertFalse(app.security_context.allow_privilege_escalation)
        self.assertEqual(str(app.security_context.run_as_user), owner.split(":")[0])
        self.assertTrue(app.security_context.run_as_non_root)
        for vm in app.volume_mounts:
            host = volumes[vm.name].host_path.path.rstrip("/")
            self.assertEqual(vm.mount_propagation, "HostToContainer", vm.name)
            self.assertTrue(vm.read_only, "the empty view must not be writable, even for root")
            self.assertNotEqual(vm.name, shared.name, "the app never gets the sidecar's volume")
            self.assertFalse(host_backing == host or host_backing.startswith(host + "/")
                             or host.startswith(host_backing + "/"), "the app never sees the backing directory")
            # The view's parent, never the mount point itself (which would
            # capture the FUSE mount and keep it dead after a stop).
            self.assertEqual(host, posixpath.dirname(host_view), vm.name)
            cache = posixpath.join(vm.mount_path, posixpath.basename(host_view))
            self.assertEqual(env_of(app).get("TILELANG_CACHE_DIR"), cache)


class PlantedMistakes(unittest.TestCase):
    """The check must reject what a typo in the YAML would be."""

    @classmethod
    def setUpClass(cls):
        cls.pod = next(d for d in load_documents(DEFAULT_YAML) if d["kind"] == "Pod")

    def rejects(self, mutate):
        doc = copy.deepcopy(self.pod)
        mutate(doc)
        with self.assertRaises(SchemaError):
            check_document(doc)

    def test_the_file_itself_passes(self):
        check_document(copy.deepcopy(self.pod))

    def test_misspelt_field(self):
        def typo(doc):
            vm = doc["spec"]["initContainers"][0]["volumeMounts"][0]
            vm["mountPropogation"] = vm.pop("mountPropagation")
        self.rejects(typo)

    def test_misspelt_top_level_field(self):
        self.rejects(lambda doc: doc.__setitem__("metdata", doc.pop("metadata")))

    def test_string_where_a_bool_belongs(self):
        self.rejects(lambda doc: doc["spec"]["initContainers"][0]["securityContext"].__setitem__("privileged", "yes"))

    def test_string_where_an_int_belongs(self):
        self.rejects(lambda doc: doc["spec"]["containers"][0]["securityContext"].__setitem__("runAsUser", "1000"))

    def test_object_where_a_list_belongs(self):
        self.rejects(lambda doc: doc["spec"]["containers"][0].__setitem__("volumeMounts", {"name": "x"}))

    def test_missing_required_field(self):
        self.rejects(lambda doc: doc["spec"]["containers"][0].pop("name"))

    def test_unknown_kind(self):
        self.rejects(lambda doc: doc.__setitem__("kind", "Podd"))


if __name__ == "__main__":
    if os.environ.get(IN_VENV) != "1":
        reexec_in_venv()
    if len(sys.argv) > 1:
        SidecarYaml.yaml_path = Path(sys.argv.pop(1))
    unittest.main(verbosity=2)
