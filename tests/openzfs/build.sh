#!/bin/bash
# OpenZFS's kernel modules and tools for the test guest's kernel (tests/guest.py), so that
# the zvol and zfs_arc_max paths run against the real kernel module (tests/test_openzfs_guest.py).
# zfsutils-linux conflicts with zfs-fuse, which fslab's other tests need, so nothing here is
# installed on the host: Debian's contrib packages are downloaded and unpacked into the
# cache, and the modules are built there from zfs-dkms's source (several minutes, once).
# Usage: tests/openzfs/build.sh [CACHE]   (default /var/cache/fslab/openzfs)
set -euo pipefail
CACHE=${1:-/var/cache/fslab/openzfs}
TESTS=$(cd "$(dirname "$0")/.." && pwd)
# The kernel tests/guest.py boots (it chooses; this script follows).
KERNEL=$(cd "$TESTS" && python3 -c 'from guest import guest_kernel; print(guest_kernel()[1].name)')
if [ -e "$CACHE/ready-$KERNEL" ]; then echo "OpenZFS for $KERNEL is ready in $CACHE"; exit 0; fi

PACKAGES="zfs-dkms zfsutils-linux libzfs4linux libzpool5linux libnvpair3linux libuutil3linux"
mkdir -p "$CACHE/apt/lists/partial" "$CACHE/apt/sources" "$CACHE/debs"
cat > "$CACHE/apt/sources/contrib.sources" <<SOURCES
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
APT=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$CACHE/apt/sources" -o "Dir::State::Lists=$CACHE/apt/lists")
apt-get "${APT[@]}" update -qq
(cd "$CACHE/debs" && apt-get "${APT[@]}" download $PACKAGES)
rm -rf "$CACHE/root" && mkdir -p "$CACHE/root"
for deb in "$CACHE"/debs/*.deb; do dpkg -x "$deb" "$CACHE/root"; done

# The build needs the guest kernel's headers and a toolchain, from Debian's main archive.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "linux-headers-$KERNEL" gcc make autoconf automake libtool
SOURCE=$(ls -d "$CACHE"/root/usr/src/zfs-* | head -1)
rm -rf "$CACHE/build" && cp -a "$SOURCE" "$CACHE/build"
cd "$CACHE/build"
./configure -q --with-config=kernel --with-linux="/usr/src/linux-headers-${KERNEL%-amd64}-common" \
    --with-linux-obj="/usr/src/linux-headers-$KERNEL" > "$CACHE/configure.log"
make -s -j"$(nproc)" > "$CACHE/make.log" 2>&1 || { tail -20 "$CACHE/make.log"; exit 1; }
rm -rf "$CACHE/modules" && mkdir -p "$CACHE/modules"
find module -name '*.ko' -exec cp {} "$CACHE/modules/" \;
ls "$CACHE/modules"/zfs.ko > /dev/null
cd "$CACHE" && rm -rf "$CACHE/build"  # ~400 MiB of objects; the source stays in root/usr/src
touch "$CACHE/ready-$KERNEL"
echo "OpenZFS $(basename "$SOURCE") for $KERNEL built in $CACHE"
