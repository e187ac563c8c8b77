#!/usr/bin/env bash
# Validates deploy/kubernetes/ against Kubernetes' schemas, strictly, without a cluster:
# tests/it/kubernetes.rs renders the kustomization (generators, replacements) and hands the
# result to kubernetes-validate (PyPI; its schemas ship in the package, so it runs offline
# once installed). .ci/run does the same install, so CI always validates:
#
#   deploy/kubernetes/validate.sh            # venv in target/kubernetes-validate
#   KUBERNETES_VERSION=1.30.0 deploy/kubernetes/validate.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${CARGO_TARGET_DIR:-target}/kubernetes-validate"
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet kubernetes-validate
fi
validator="$venv/bin/kubernetes-validate"
if [ -n "${KUBERNETES_VERSION:-}" ]; then
  # kubernetes-validate takes the version as a flag; a wrapper passes it through.
  wrapper="$venv/bin/kubernetes-validate-$KUBERNETES_VERSION"
  printf '#!/bin/sh\nexec "%s" -k "%s" "$@"\n' "$(realpath "$validator")" "$KUBERNETES_VERSION" > "$wrapper"
  chmod +x "$wrapper"
  validator="$wrapper"
fi
FAUXPAY_KUBERNETES_VALIDATE="$(realpath "$validator")" \
  cargo test -p fauxpay --test it -- --nocapture kubernetes::the_rendered_resources_match_kubernetes_schemas_when_asked
