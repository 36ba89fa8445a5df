#!/usr/bin/python3
"""Checks that deploy/ agrees with itself and with the manta CLI that was built.

The Dockerfile, the entrypoint and the Kubernetes manifests name the same things (CLI
flags, the token's path, the GCS port, environment variables) in different files; when
one drifts, nothing fails until a pod does, on a cluster. This finds such drift without
a cluster or Docker. It runs `manta [start|<probe's subcommand>] --help`, and runs the
entrypoint with a stub for manta (each role with every variable set, and each manifest's
environment), and checks: the YAML parses; the entrypoint passes bash -n, exits 0 (2 for
a bad MANTA_ROLE) and passes only flags `manta start --help` lists, with a private copy
of the token; probes run listed subcommands with listed flags; pods mount a Secret and
key that exist at the entrypoint's default MANTA_TOKEN_FILE, and secret.yaml holds no
real token; a Service leads to the head's GCS port, and MANTA_HEAD_ADDRESS/RAY_ADDRESS
name it; every variable set is one the entrypoint or Manta's sources read; containers
run as non-root; the Dockerfile's ENTRYPOINT is where its builder installs the script
and its USER is not root.
Usage: check_manifests.py --manta <built manta CLI> --source <repository root>
Exit 0 when all holds, else 1 after printing each mismatch.
"""
import argparse
import base64
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

import yaml

ENTRYPOINT = "deploy/container/manta-entrypoint.sh"
DOCKERFILE = "deploy/container/Dockerfile"
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}
errors = []
fail = errors.append


def help_entries(manta, *words, section=None):
    """What `manta <words> --help` (CLI11) lists: the options, or the entries of `section`."""
    try:
        run = subprocess.run([manta, *words, "--help"], capture_output=True, text=True, timeout=30)
    except OSError as e:
        fail(f"cannot run {manta}: {e}")
        return set()
    if run.returncode != 0:
        fail(f"`manta {' '.join(words)} --help` exited {run.returncode}: {run.stderr.strip()}")
    names, current = set(), None
    for line in run.stdout.splitlines():
        if line and not line.startswith(" "):
            current = line.rstrip(":")
        elif re.match(r"  \S", line) and (current == section if section else line.lstrip().startswith("-")):
            names.update(n for n in line.split()[0].split(",") if n)
    return names


def check_entrypoint(script, tmp, what, env, start_flags, expected_code=0):
    """Runs the entrypoint with a stub manta (tmp/stub-manta) and checks the command it runs."""
    out, token, private = os.path.join(tmp, "argv"), os.path.join(tmp, "token"), os.path.join(tmp, "private")
    for stale in (out, private):
        if os.path.exists(stale):
            os.remove(stale)
    base = {"PATH": "/usr/bin:/bin", "TMPDIR": tmp, "MANTA_BIN": os.path.join(tmp, "stub-manta"), "STUB_OUT": out,
            "MANTA_TOKEN_FILE": token, "MANTA_CLUSTER_TOKEN_FILE": private}
    run = subprocess.run(["bash", script], env={**env, **base}, capture_output=True, text=True, timeout=30)
    argv = open(out).read().split("\0")[:-1] if os.path.exists(out) else []
    if run.returncode != expected_code or (expected_code == 0) != bool(argv):
        return fail(f"entrypoint ({what}) exited {run.returncode}, not {expected_code}: {run.stderr.strip()}")
    if expected_code != 0:
        return
    if argv[0] != "start":
        fail(f"entrypoint ({what}) runs `manta {argv[0]}`, not `manta start`")
    for flag in sorted(a for a in argv[1:] if a.startswith("--") and a not in start_flags):
        fail(f"entrypoint ({what}) passes {flag}, which `manta start --help` does not list")
    if "--token-file" not in argv or argv[argv.index("--token-file") + 1] != private:
        fail(f"entrypoint ({what}) does not pass its private copy of the token as --token-file")
    elif not os.path.isfile(private) or open(private).read() != open(token).read() or os.stat(private).st_mode & 0o77:
        fail(f"entrypoint ({what}): the private copy of the token is missing, wrong, or readable by others")


def resolved_env(container):
    """The container's environment, with the values Kubernetes fills in made up."""
    env = {}
    for var in container.get("env", []):
        source = var.get("valueFrom", {})
        if "fieldRef" in source:
            env[var["name"]] = "10.0.0.7" if source["fieldRef"]["fieldPath"] == "status.podIP" else "pod-0"
        elif "resourceFieldRef" in source:
            env[var["name"]] = "2" if "cpu" in source["resourceFieldRef"]["resource"] else "4294967296"
        else:
            env[var["name"]] = str(var.get("value", "x"))
    return env


def manta_variables(source):
    """The variables Manta's sources read, and MANTA_<tunable> for each tunable."""
    names = set()
    for path in glob.glob(f"{source}/src/**/*.[ch]*", recursive=True) + glob.glob(f"{source}/include/**/*.h"):
        text = open(path, errors="replace").read()
        names.update(re.findall(r'(?:getenv\(|Env\(|Env\[\] = )"([A-Z][A-Z0-9_]*[A-Z0-9])"', text))
    config = open(f"{source}/src/common/config_def.h").read()
    return names | {"MANTA_" + n for n in re.findall(r"^MANTA_CONFIG\([\w:]+,\s*(\w+)", config, re.M)}


def gcs_routes(namespace, labels, container, gcs_port, services):
    """(namespace, Service, port) of each Service port that leads to the head's GCS port."""
    named = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    routes = set()
    for (ns, name), service in services.items():
        selector = service["spec"].get("selector")
        if ns != namespace or not selector or not selector.items() <= labels.items():
            continue
        for port in service["spec"].get("ports", []):
            target = port.get("targetPort", port["port"])
            if named.get(target, target) == gcs_port:
                routes.add((ns, name, port["port"]))
    return routes


def leads_to_gcs(address, namespace, routes):
    """Whether host:port names a port of `routes`: "service", "service.namespace", ...:port."""
    host, _, port = address.rpartition(":")
    labels = host.split(".")
    return port.isdigit() and (len(labels) == 1 or labels[1] == namespace) and (namespace, labels[0], int(port)) in routes


def check_probes(where, container, env, manta, subcommands, gcs_port):
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        command = container.get(kind, {}).get("exec", {}).get("command")
        if not command:
            continue
        if os.path.basename(command[0]) != "manta" or len(command) < 2 or command[1] not in subcommands:
            fail(f"{where}: {kind} {command} is not a manta subcommand")
            continue
        known = help_entries(manta, command[1])
        for flag in (w for w in command[2:] if w.startswith("-") and w not in known):
            fail(f"{where}: {kind} passes {flag}, which `manta {command[1]} --help` does not list")
        if env.get("MANTA_ROLE") == "head" and "--address" in command[:-1]:
            port = command[command.index("--address") + 1].rpartition(":")[2]
            if port != str(gcs_port):
                fail(f"{where}: {kind} asks port {port} of the head, whose GCS listens on {gcs_port}")


def check_token_mount(where, namespace, spec, container, env, secrets, default_token):
    volumes = {v["name"]: v.get("secret") for v in spec.get("volumes", [])}
    files, secret_dirs = [], []
    for mount in (m for m in container.get("volumeMounts", []) if volumes.get(m["name"])):
        volume = volumes[mount["name"]]
        secret_dirs.append(mount["mountPath"].rstrip("/") + "/")
        secret = secrets.get((namespace, volume["secretName"]))
        if secret is None:
            fail(f"{where}: mounts Secret {volume['secretName']}, which no manifest defines")
            continue
        keys = set(secret.get("stringData", {})) | set(secret.get("data", {}))
        for item in volume.get("items") or [{"key": k, "path": k} for k in keys]:
            if item["key"] not in keys:
                fail(f"{where}: Secret {volume['secretName']} has no key {item['key']}")
            files.append(os.path.join(mount["mountPath"], item["path"]))
    if env.get("MANTA_TOKEN_FILE", default_token) not in files:
        fail(f"{where}: the token file {env.get('MANTA_TOKEN_FILE', default_token)} is no mounted Secret file {files}")
    private = env.get("MANTA_CLUSTER_TOKEN_FILE", "")
    if any(private.startswith(d) for d in secret_dirs):
        fail(f"{where}: MANTA_CLUSTER_TOKEN_FILE={private} is a Secret's file, which Manta refuses to read")


def check_dockerfile(source):
    stages = []
    for line in re.sub(r"\\\n", " ", open(f"{source}/{DOCKERFILE}").read()).splitlines():
        keyword, _, rest = line.strip().partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        elif stages and keyword and not keyword.startswith("#"):
            stages[-1].append((keyword.upper(), rest.strip()))
    installed = None
    for rest in (r for stage in stages[:-1] for k, r in stage if k == "RUN"):
        for words in (shlex.split(step) for step in re.split(r"&&|;", rest)):
            if words[:1] != ["install"] or "-m" not in words or words[words.index("-m") + 1].lstrip("0") != "755":
                continue
            paths = [w for i, w in enumerate(words) if i and not w.startswith("-") and words[i - 1] != "-m"]
            if paths[:1] == [ENTRYPOINT] and len(paths) == 2:
                installed = paths[1]
    if installed is None:
        return fail(f"{DOCKERFILE}: no builder stage installs {ENTRYPOINT} with mode 0755")
    entry = [json.loads(rest) for keyword, rest in stages[-1] if keyword == "ENTRYPOINT"]
    if not entry or entry[-1][0] != installed:
        fail(f"{DOCKERFILE}: ENTRYPOINT {entry[-1] if entry else None} is not {installed}, where the builder puts it")
    if not any(k == "COPY" and "--from=" in r and installed.startswith(r.split()[-2]) for k, r in stages[-1]):
        fail(f"{DOCKERFILE}: the last stage copies nothing that holds {installed} from the builder")
    users = [rest.split(":")[0] for keyword, rest in stages[-1] if keyword == "USER"]
    if not users or users[-1] in ("root", "0"):
        fail(f"{DOCKERFILE}: the image runs as root (last USER: {users[-1] if users else 'none'})")


def load_manifests(source):
    docs = []
    for path in sorted(glob.glob(f"{source}/deploy/kubernetes/*.yaml")):
        try:
            docs += [(path, d) for d in yaml.safe_load_all(open(path)) if d is not None]
        except yaml.YAMLError as e:
            fail(f"{path} does not parse: {e}")
    for path, doc in docs:
        if not isinstance(doc, dict) or not all(doc.get(k) for k in ("apiVersion", "kind", "metadata")):
            fail(f"{path}: a document without apiVersion, kind and metadata")
    return [d for _, d in docs if isinstance(d, dict) and d.get("kind") and d.get("metadata")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manta", required=True, help="the built manta CLI")
    parser.add_argument("--source", required=True, help="the repository root")
    options = parser.parse_args()
    source, script = options.source, os.path.join(options.source, ENTRYPOINT)
    subcommands = help_entries(options.manta, section="Subcommands")
    start_flags = help_entries(options.manta, "start")
    if "--block" not in start_flags:
        fail(f"`manta start --help` lists no --block: is {options.manta} the manta CLI?")
        return report()
    if subprocess.run(["bash", "-n", script]).returncode != 0:
        fail(f"{ENTRYPOINT} does not parse (bash -n)")
    text = open(script).read()
    script_vars = set(re.findall(r"\bMANTA_[A-Z0-9_]+\b", text))
    default_token = re.search(r"MANTA_TOKEN_FILE:-([^}]+)\}", text).group(1)
    default_gcs_port = int(re.search(r"MANTA_GCS_PORT:-(\d+)\}", text).group(1))
    allowed_vars = script_vars | manta_variables(source)

    docs = load_manifests(source)
    key = lambda d: (d["metadata"].get("namespace", "default"), d["metadata"]["name"])
    secrets = {key(d): d for d in docs if d["kind"] == "Secret"}
    services = {key(d): d for d in docs if d["kind"] == "Service"}
    for (_, name), secret in secrets.items():
        values = [str(v) for v in secret.get("stringData", {}).values()]
        values += [base64.b64decode(v).decode(errors="replace") for v in secret.get("data", {}).values()]
        if any(re.fullmatch(r"[0-9a-f]{64}\s*", v) for v in values):
            fail(f"Secret {name} holds a real token: keep tokens out of the repository")
    pods = [(f"{d['kind']} {d['metadata']['name']}, container {c['name']}", key(d)[0],
             d["spec"]["template"]["metadata"].get("labels", {}), d["spec"]["template"]["spec"], c, resolved_env(c))
            for d in docs if d["kind"] in WORKLOADS for c in d["spec"]["template"]["spec"].get("containers", [])]
    routes = set()
    for where, namespace, labels, spec, container, env in pods:
        if env.get("MANTA_ROLE") == "head":
            gcs_port = int(env.get("MANTA_GCS_PORT", default_gcs_port))
            found = gcs_routes(namespace, labels, container, gcs_port, services)
            if not found:
                fail(f"{where}: no Service sends traffic to the GCS port {gcs_port}")
            routes |= found

    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "stub-manta"), "w") as stub:
            stub.write('#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a"; done > "$STUB_OUT"\n')
        os.chmod(os.path.join(tmp, "stub-manta"), 0o755)
        with open(os.path.join(tmp, "token"), "w") as token:
            token.write("ab" * 32 + "\n")
        os.chmod(os.path.join(tmp, "token"), 0o644)  # as a Secret's file is: the entrypoint must copy it
        everything = {v: "1" for v in script_vars}
        everything.update(MANTA_NODE_IP="10.0.0.7", MANTA_HEAD_ADDRESS="head:6379", MANTA_RESOURCES='{"a": 1}',
                          MANTA_SYSTEM_CONFIG="{}", MANTA_BIND_ADDRESS="0.0.0.0", MANTA_NODE_NAME="n")
        for role in ("head", "worker"):
            check_entrypoint(script, tmp, f"MANTA_ROLE={role}, every variable set", {**everything, "MANTA_ROLE": role},
                             start_flags)
        check_entrypoint(script, tmp, "MANTA_ROLE=boss", {**everything, "MANTA_ROLE": "boss"}, start_flags, 2)

        for where, namespace, labels, spec, container, env in pods:
            linked = [n for ns, n in services if ns == namespace and n.upper().replace("-", "_").startswith("MANTA_")]
            if linked and spec.get("enableServiceLinks", True):
                fail(f"{where}: needs enableServiceLinks: false, or Service {linked[0]} adds MANTA_* variables")
            context = {**spec.get("securityContext", {}), **container.get("securityContext", {})}
            if context.get("runAsNonRoot") is not True or context.get("runAsUser", 1) == 0:
                fail(f"{where}: does not run as non-root (runAsNonRoot: true, runAsUser not 0)")
            for var in sorted(set(env) - allowed_vars):
                fail(f"{where}: sets {var}, which neither the entrypoint nor Manta reads")
            check_probes(where, container, env, options.manta, subcommands,
                         int(env.get("MANTA_GCS_PORT", default_gcs_port)))
            check_token_mount(where, namespace, spec, container, env, secrets, default_token)
            check_entrypoint(script, tmp, where, env, start_flags)
            for var in ("MANTA_HEAD_ADDRESS", "RAY_ADDRESS"):
                if var in env and not leads_to_gcs(env[var], namespace, routes):
                    fail(f"{where}: {var}={env[var]} is no Service port (of namespace {namespace}) that leads to "
                         "the head's GCS")
    check_dockerfile(source)
    return report()


def report():
    for message in dict.fromkeys(errors):
        print(f"check_manifests: {message}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
