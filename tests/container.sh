#!/usr/bin/env bash
# Build the image of ./Containerfile with podman and run the README's sample
# job in it, as its non-root user:
#
#   sudo bash tests/container.sh                       # summary-line check
#   sudo NEARDUP_BIN=target/release/neardup bash tests/container.sh   # + byte identity
#
# It needs no container registry: the two base images (Debian bookworm) are
# made with debootstrap from a Debian mirror and kept in podman's storage by
# tag, so only the first run makes them. Without root or podman it prints
# "SKIPPED: ..." and exits 0 (as root it installs podman, debootstrap and runc
# with apt-get first). The release build takes long (74 min on 2 cores shared
# with another build, 2026-11-25; cache mounts make a rebuild quick),
# which is why CI does not run this script.
#
# Environment:
#   NEARDUP_BIN          a host build of neardup: the container's Parquet output
#                        must be byte-identical to its output for the same job
#   NEARDUP_IMAGE        image to build (default localhost/neardup:0.1.0)
#   NEARDUP_BUILD_BASE   build base tag (default localhost/neardup-base-build:bookworm)
#   NEARDUP_RUNTIME_BASE runtime base tag (default localhost/neardup-base-runtime:bookworm)
#   NEARDUP_BUILD_CA     CA bundle given to the build as the secret host_ca, for
#                        a TLS-inspecting proxy (default: the host's own bundle,
#                        /etc/ssl/certs/ca-certificates.crt, if present; set it
#                        empty for none). Never stored in the image.
#   DEBIAN_MIRROR        default http://deb.debian.org/debian
#   DEBIAN_SECURITY      default http://deb.debian.org/debian-security
#   NICE                 niceness of debootstrap and the builds (default 19)
#   CPU_SHARES           cpu weight of the builds' RUN steps (default 2, of 1024).
#                        A RUN step runs in its own cpu cgroup, where the nice
#                        value of podman counts only against the step's own
#                        processes; --cpu-shares 2 is what makes the build take
#                        only CPU time that nothing else on the machine wants.
#   CONTAINERS_CONF      default tests/containers.conf (runc, ulimits: see there)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGE=${NEARDUP_IMAGE:-localhost/neardup:0.1.0}
BUILD_BASE=${NEARDUP_BUILD_BASE:-localhost/neardup-base-build:bookworm}
RUNTIME_BASE=${NEARDUP_RUNTIME_BASE:-localhost/neardup-base-runtime:bookworm}
BUILD_CA=${NEARDUP_BUILD_CA-/etc/ssl/certs/ca-certificates.crt}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
NICE=${NICE:-19}
CPU_SHARES=${CPU_SHARES:-2}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$ROOT/tests/containers.conf}
EXPECTED_SUMMARY="507 documents (2 without terms): 65 duplicates in 65 clusters, 65 pairs"

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   - $*"; }
not_ok() { failed=$((failed + 1)); echo "FAIL - $*"; }
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then ok "$what"; else not_ok "$what"; fi
}
finish() {
    echo "container: $passed passed, $failed failed"
    if [ "$failed" -gt 0 ]; then
        echo "work files kept in $WORK"
        exit 1
    fi
    rm -rf "$WORK"
    exit 0
}
skip() { echo "SKIPPED: $*"; exit 0; }
elapsed() { local s=$(( $(date +%s) - $1 )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

# (a) root and podman ---------------------------------------------------------
[ "$(id -u)" = 0 ] || skip "tests/container.sh needs root (rootful podman and debootstrap)"
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v runc >/dev/null || missing+=(runc)
if [ ${#missing[@]} -gt 0 ]; then
    command -v apt-get >/dev/null || skip "no ${missing[*]} and no apt-get to install them"
    echo "installing ${missing[*]} with apt-get"
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        podman debootstrap runc uidmap fuse-overlayfs slirp4netns ca-certificates; } >/dev/null 2>&1 \
        || skip "could not install ${missing[*]} with apt-get"
fi
podman_error=$(podman info 2>&1 >/dev/null) || skip "podman does not run here: $podman_error"
echo "$(podman --version); runtime $(podman info --format '{{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Version}}' 2>/dev/null | head -1); CONTAINERS_CONF=$CONTAINERS_CONF"

WORK=$(mktemp -d /var/tmp/neardup-container.XXXXXX)

# (b) base images from debootstrap, cached by tag ------------------------------
runtime_base() {
    if podman image exists "$RUNTIME_BASE"; then echo "runtime base $RUNTIME_BASE: in storage"; return 0; fi
    local start rootfs
    start=$(date +%s)
    rootfs=$WORK/rootfs
    echo "runtime base $RUNTIME_BASE: debootstrap --variant=minbase --include=ca-certificates bookworm $MIRROR"
    if ! nice -n "$NICE" debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" "$MIRROR" \
        >"$WORK/debootstrap.log" 2>&1; then
        tail -20 "$WORK/debootstrap.log"
        return 1
    fi
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
    tar -C "$rootfs" --numeric-owner -cf - . \
        | podman import --quiet --change 'CMD ["/bin/bash"]' \
            --change "LABEL org.opencontainers.image.description=debootstrap-minbase-bookworm+ca-certificates" \
            - "$RUNTIME_BASE" >/dev/null || return 1
    rm -rf "$rootfs"
    echo "runtime base $RUNTIME_BASE: made in $(elapsed "$start")"
}
build_base() {
    if podman image exists "$BUILD_BASE"; then echo "build base $BUILD_BASE: in storage"; return 0; fi
    local start ctx
    start=$(date +%s)
    ctx=$WORK/build-base
    mkdir -p "$ctx"
    # Debian's rustc/cargo 1.63 are older than Cargo.toml's rust-version;
    # rustc-web and cargo-web from bookworm-security (/usr/bin/rustc, cargo)
    # are recent enough.
    cat >"$ctx/Containerfile" <<EOF
FROM $RUNTIME_BASE
RUN echo 'deb $SECURITY bookworm-security main' > /etc/apt/sources.list.d/security.list \\
 && apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends rustc-web cargo-web gcc libc6-dev pkg-config \\
 && rm -rf /var/lib/apt/lists/* \\
 && rustc --version && cargo --version
EOF
    echo "build base $BUILD_BASE: $RUNTIME_BASE + rustc-web cargo-web gcc libc6-dev pkg-config"
    nice -n "$NICE" podman build --cpu-shares "$CPU_SHARES" -t "$BUILD_BASE" "$ctx" >"$WORK/build-base.log" 2>&1 \
        || { tail -20 "$WORK/build-base.log"; return 1; }
    grep -E '^(rustc|cargo) [0-9]' "$WORK/build-base.log" | sed 's/^/  /'
    echo "build base $BUILD_BASE: made in $(elapsed "$start")"
}
check "runtime base image (debootstrap)" runtime_base
check "build base image (runtime base + Rust toolchain)" build_base
[ "$failed" = 0 ] || finish

# (c) the image ----------------------------------------------------------------
build_args=(--build-arg "BUILD_BASE=$BUILD_BASE" --build-arg "RUNTIME_BASE=$RUNTIME_BASE")
if [ -n "$BUILD_CA" ] && [ -f "$BUILD_CA" ]; then
    build_args+=(--secret "id=host_ca,src=$BUILD_CA")
    echo "build secret host_ca: $BUILD_CA (cargo's CA bundle during the build only)"
fi
echo "building $IMAGE (nice -n $NICE podman build --cpu-shares $CPU_SHARES ...; log: $WORK/build.log)"
start=$(date +%s)
nice -n "$NICE" podman build --cpu-shares "$CPU_SHARES" "${build_args[@]}" -t "$IMAGE" -f "$ROOT/Containerfile" "$ROOT" >"$WORK/build.log" 2>&1
build_status=$?
echo "build took $(elapsed "$start") (exit $build_status)"
if [ "$build_status" != 0 ]; then
    tail -30 "$WORK/build.log"
    not_ok "podman build $IMAGE"
    finish
fi
ok "podman build $IMAGE"
grep -E '^(cargo|rustc) [0-9]|Finished .release' "$WORK/build.log" | sed 's/^/  /'

# (d) the README's sample job in the container -----------------------------------
mkdir -p "$WORK/out"
chown 10001:10001 "$WORK/out" # the image's user; the only folder it may write
podman run --rm --network=none \
    -v "$ROOT/sample_data:/data:ro" -v "$WORK/out:/out" "$IMAGE" \
    dedup --input news=/data/news.parquet --input reprints=/data/reprints.parquet \
    --output /out/sample-out --overwrite >"$WORK/run.log" 2>&1
run_status=$?
sed 's/^/  | /' "$WORK/run.log"
check "sample job exits 0 in the container (exit $run_status)" test "$run_status" = 0
check "output complete (_SUCCESS) and written by uid 10001" \
    test -f "$WORK/out/sample-out/_SUCCESS" -a "$(stat -c %u "$WORK/out/sample-out/_SUCCESS" 2>/dev/null)" = 10001

# (e) user, PATH, libraries, results -------------------------------------------
inside() { podman run --rm --network=none --entrypoint sh "$IMAGE" -c "$1" 2>&1; }
uid=$(inside 'id -u')
non_root() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" != 0 ]; }
check "runs as a non-root user (id -u = $uid)" non_root "$uid"
path=$(inside 'command -v neardup')
check "neardup on PATH ($path)" test "$path" = /usr/local/bin/neardup
libs=$(inside 'ldd /usr/local/bin/neardup')
echo "$libs" | sed 's/^/  ldd: /'
check "shared libraries all found, no OpenSSL" \
    bash -c '! grep -qE "not found|libssl|libcrypto" <<<"$1"' _ "$libs"
user=$(podman image inspect --format '{{.Config.User}} {{.Config.WorkingDir}} {{index .Config.Labels "org.opencontainers.image.licenses"}}' "$IMAGE")
check "image config: user, workdir, license label ($user)" test "$user" = "10001:10001 /work Apache-2.0"

summary() { sed -n 's/^\([0-9][0-9]* documents .*pairs\); wrote .*/\1/p' "$1" | tail -1; }
container_summary=$(summary "$WORK/run.log")
tables=(clusters pairs fingerprints)
if [ -n "${NEARDUP_BIN:-}" ]; then
    echo "host binary: $NEARDUP_BIN"
    (cd "$ROOT" && "$NEARDUP_BIN" dedup --input news=sample_data/news.parquet \
        --input reprints=sample_data/reprints.parquet --output "$WORK/host-out" --overwrite) >"$WORK/host.log" 2>&1
    check "sample job exits 0 on the host" test $? = 0
    host_summary=$(summary "$WORK/host.log")
    check "summary line as on the host ($container_summary)" test -n "$host_summary" -a "$container_summary" = "$host_summary"
    for t in "${tables[@]}"; do
        a=$(cd "$WORK/out/sample-out" 2>/dev/null && find "$t" -name '*.parquet' -type f | sort | xargs -r sha256sum)
        b=$(cd "$WORK/host-out" 2>/dev/null && find "$t" -name '*.parquet' -type f | sort | xargs -r sha256sum)
        echo "$a" | sed 's/^/  /'
        check "$t Parquet byte-identical to the host binary's" test -n "$a" -a "$a" = "$b"
    done
else
    echo "NEARDUP_BIN not set: no byte comparison with a host build; checking the summary line instead"
    check "summary line \"$EXPECTED_SUMMARY\" (got \"$container_summary\")" test "$container_summary" = "$EXPECTED_SUMMARY"
    for t in "${tables[@]}"; do
        check "$t Parquet written" test -n "$(find "$WORK/out/sample-out/$t" -name '*.parquet' -type f 2>/dev/null)"
    done
fi

# (f) -------------------------------------------------------------------------
finish
