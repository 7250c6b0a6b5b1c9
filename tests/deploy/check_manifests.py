#!/usr/bin/env python3
"""Checks what deploy/ promises beyond schema validity, on `kubectl kustomize` output.

    check_manifests.py base|sidecar|oauth|shared-state RENDERED.yaml

Every container: read-only root, no privilege escalation, every capability dropped, non-root.
eragate's container: probes on /healthz and /readyz. base (and the oauth overlay): a
Deployment, Service, HorizontalPodAutoscaler and PodDisruptionBudget, the session key from a
Secret. sidecar: two containers in one Pod, eragate's the only port declared and the only one
the Service and NetworkPolicy let in. oauth: the configuration has [auth.oauth] and a public URL.
shared-state: the configuration names [redis] by `url_env` only, and that variable and the
Redis CA come from Secrets.
Prints one line per failed promise and exits 1 if any failed.
"""

import sys

import yaml

kind_name, path = sys.argv[1], sys.argv[2]
with open(path, encoding="utf-8") as f:
    docs = [d for d in yaml.safe_load_all(f) if d]
by_kind = {}
for doc in docs:
    by_kind.setdefault(doc["kind"], []).append(doc)
problems = []


def expect(ok, what):
    if not ok:
        problems.append(what)


def one(kind):
    found = by_kind.get(kind, [])
    expect(len(found) == 1, f"expected one {kind}, found {len(found)}")
    return found[0] if found else {}


deployment = one("Deployment")
pod = deployment.get("spec", {}).get("template", {}).get("spec", {})
containers = pod.get("containers", [])
pod_security = pod.get("securityContext", {})
for c in containers:
    sc = c.get("securityContext", {})
    name = c.get("name")
    expect(sc.get("readOnlyRootFilesystem") is True, f"{name}: root filesystem not read-only")
    expect(sc.get("allowPrivilegeEscalation") is False, f"{name}: privilege escalation allowed")
    expect(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{name}: capabilities not all dropped")
    expect(
        sc.get("runAsNonRoot", pod_security.get("runAsNonRoot")) is True, f"{name}: may run as root"
    )
eragate = next((c for c in containers if c.get("name") == "eragate"), {})
expect(bool(eragate), "no eragate container")
for probe, want in [("livenessProbe", "/healthz"), ("startupProbe", "/healthz"), ("readinessProbe", "/readyz")]:
    got = eragate.get(probe, {}).get("httpGet", {}).get("path")
    expect(got == want, f"eragate {probe} on {got}, want {want}")
keys = [e for e in eragate.get("env", []) if e.get("name") == "ERAGATE_SESSION_KEY"]
expect(
    bool(keys) and "secretKeyRef" in (keys[0].get("valueFrom") or {}),
    "ERAGATE_SESSION_KEY does not come from a Secret",
)
config = one("ConfigMap").get("data", {}).get("eragate.toml", "")
expect('address = "0.0.0.0:8080"' in config, "eragate.toml does not listen on 0.0.0.0:8080")

if kind_name in ("base", "oauth", "shared-state"):
    for kind in ("Service", "HorizontalPodAutoscaler", "PodDisruptionBudget"):
        one(kind)
    hpa = by_kind.get("HorizontalPodAutoscaler", [{}])[0]
    expect(hpa.get("spec", {}).get("scaleTargetRef", {}).get("name") == deployment["metadata"]["name"], "HPA scales something else")
    expect(hpa.get("spec", {}).get("minReplicas", 0) >= 2, "HPA allows fewer than 2 replicas")
if kind_name == "oauth":
    expect("[auth.oauth]" in config and "public_url" in config, "the oauth overlay's config has no [auth.oauth] / public_url")
if kind_name == "shared-state":
    expect("[redis]" in config and 'url_env = "ERAGATE_REDIS_URL"' in config, "no [redis] url_env in eragate.toml")
    expect("rediss://" not in config and "redis://" not in config, "a Redis URL is written in the ConfigMap")
    urls = [e for e in eragate.get("env", []) if e.get("name") == "ERAGATE_REDIS_URL"]
    expect(
        bool(urls) and "secretKeyRef" in (urls[0].get("valueFrom") or {}),
        "ERAGATE_REDIS_URL does not come from a Secret",
    )
    mounts = {m.get("name"): m for m in eragate.get("volumeMounts", [])}
    volumes = {v.get("name"): v for v in pod.get("volumes", [])}
    expect(mounts.get("redis-ca", {}).get("readOnly") is True, "the Redis CA is not mounted read-only")
    expect("secret" in volumes.get("redis-ca", {}), "the Redis CA does not come from a Secret")
if kind_name == "sidecar":
    expect(len(containers) == 2, f"sidecar Pod has {len(containers)} containers, want 2")
    ports = [(c["name"], p["containerPort"]) for c in containers for p in c.get("ports", [])]
    expect(ports == [("eragate", 8080)], f"ports declared: {ports}, want only eragate's 8080")
    service = one("Service")
    expect([p.get("targetPort") for p in service.get("spec", {}).get("ports", [])] == ["mcp"], "Service exposes more than eragate")
    policy = one("NetworkPolicy")
    allowed = [p.get("port") for rule in policy.get("spec", {}).get("ingress", []) for p in rule.get("ports", [])]
    expect(allowed == [8080], f"NetworkPolicy admits {allowed}, want [8080]")
    expect("http://127.0.0.1:3001/mcp" in config, "the sidecar's eragate does not reach the server on loopback")

for p in problems:
    print(f"{kind_name}: {p}")
sys.exit(1 if problems else 0)
