#!/usr/bin/env bash
# Builds the image deploy/Dockerfile describes without a registry (no base image to pull):
# from scratch, with a toolshim binary built here and the shared libraries it links, and the
# same user, environment, volume, port, health check and entrypoint. CI builds it with the
# test binary and runs it (tests/e2e/test_image.py); with a registry, build the Dockerfile.
#
#   deploy/build-image.sh BINARY [TAG]     (buildah, as root; prints the image id)
set -euo pipefail
binary="${1:?usage: deploy/build-image.sh BINARY [TAG]}"
tag="${2:-localhost/toolshim:local}"
buildah=(buildah --storage-driver "${STORAGE_DRIVER:-vfs}")
# Docker format: the OCI one has no HEALTHCHECK.
export BUILDAH_FORMAT=docker

ctr="$("${buildah[@]}" from scratch)"
trap '"${buildah[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
mnt="$("${buildah[@]}" mount "$ctr")"

install -D -m 0755 "$binary" "$mnt/usr/local/bin/toolshim"
# The dynamic loader and every library the binary links, at the same paths.
while read -r lib; do
    [[ -n "$lib" && -e "$lib" ]] && install -D -m 0755 "$lib" "$mnt$lib"
done < <(ldd "$binary" | awk '/=> \// {print $3} $1 ~ /^\/.*ld-linux/ {print $1}')
mkdir -p "$mnt/etc" "$mnt/tmp" "$mnt/var/lib/toolshim"
chmod 0755 "$mnt"
echo "toolshim:x:10001:10001:toolshim:/var/lib/toolshim:/nonexistent" > "$mnt/etc/passwd"
echo "toolshim:x:10001:" > "$mnt/etc/group"
chmod 1777 "$mnt/tmp"
chown 10001:10001 "$mnt/var/lib/toolshim"
"${buildah[@]}" umount "$ctr" >/dev/null

"${buildah[@]}" config \
    --user 10001:10001 \
    --env TOOLSHIM_LISTEN=0.0.0.0:8080 \
    --env XDG_STATE_HOME=/var/lib/toolshim \
    --volume /var/lib/toolshim \
    --port 8080 \
    --stop-signal SIGTERM \
    --healthcheck 'CMD /usr/local/bin/toolshim health --url http://127.0.0.1:8080/readyz' \
    --healthcheck-interval 10s --healthcheck-timeout 5s --healthcheck-start-period 5s --healthcheck-retries 3 \
    --entrypoint '["/usr/local/bin/toolshim", "serve"]' \
    --cmd '' \
    "$ctr"
"${buildah[@]}" commit --quiet --format docker "$ctr" "$tag"
