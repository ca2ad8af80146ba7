#!/usr/bin/env bash
# Builds the Debian package: bin/deb/trestle_VERSION_ARCH.deb from what
# `make build` made (the binary, its man pages and completions) and dist/.
# make deb runs it; dpkg-deb builds it, as root or not (--root-owner-group).
#
# Usage: scripts/deb.sh [OUTDIR]     (default bin/deb; prints the .deb's path)
#
# VERSION: the tag vX.Y.Z at HEAD gives X.Y.Z; N commits after it,
# X.Y.Z+N.gHASH (N first, so that later builds sort after earlier ones);
# before any tag, 0.0.0+N.gHASH; a tree with changes not committed adds
# .dirty. DEB_VERSION overrides it (the package test builds two versions).
# DEB_COMPRESS overrides dpkg-deb's compressor, xz: xz is most of the
# build's time (20 of its 25 s of CPU), and the package test builds the second
# version, which it only upgrades to, with none.
#
# A step that fails ends the script with one line, "deb: ...".
set -Eeuo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. scripts/fail.sh
out=${1:-bin/deb}
bin=${BIN:-bin/trestle}

deb_version() {
	local desc tag n hash
	hash=$(git rev-parse --short=12 HEAD)
	if desc=$(git describe --tags --match 'v[0-9]*' --long 2>/dev/null); then
		tag=${desc%-*-g*}
		n=${desc%-g*}
		n=${n##*-}
		tag=${tag#v}
	else
		tag=0.0.0
		n=$(git rev-list --count HEAD)
	fi
	local v=$tag
	if [[ $n != 0 || $tag == 0.0.0 ]]; then
		v="$tag+$n.g$hash"
	fi
	if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
		v="$v.dirty"
	fi
	echo "$v"
}

version=${DEB_VERSION:-$(deb_version)}
# The last commit's time dates the pages, the changelog and the archive.
epoch=$(git log -1 --format=%ct)
arch=$(dpkg --print-architecture)
[[ -x $bin ]] || fail "$bin is missing: run make build first"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
d=$stage
chmod 0755 "$d"

install -D -m 0755 "$bin" "$d/usr/sbin/trestle"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$d/usr/sbin/trestle"
install -d "$d/usr/lib/systemd/system"
sed 's|@BINDIR@|/usr/sbin|g' dist/trestle.service >"$d/usr/lib/systemd/system/trestle.service"
chmod 0644 "$d/usr/lib/systemd/system/trestle.service"
install -D -m 0644 dist/debian/trestle.toml "$d/etc/trestle/trestle.toml"
install -D -m 0644 dist/trestle.toml "$d/usr/share/doc/trestle/examples/trestle.toml"

# The CNI plugin, where the spec's runtimes look (/opt/cni/bin: containerd's
# and CRI-O's default) pointing at where Debian keeps plugins (/usr/lib/cni).
cni=
if [[ -x bin/cni/trestle ]]; then
	cni=1
	install -D -m 0755 bin/cni/trestle "$d/usr/lib/cni/trestle"
	strip --strip-unneeded --remove-section=.comment --remove-section=.note "$d/usr/lib/cni/trestle"
	install -d "$d/opt/cni/bin"
	ln -s /usr/lib/cni/trestle "$d/opt/cni/bin/trestle"
fi
# The scripts QEMU and libvirt call with a TAP's name.
# qemu-common is what both read (the profile), beside them; the profile's
# example goes with the docs (/etc/trestle/qemu.conf is the operator's).
install -D -m 0755 dist/qemu-ifup "$d/usr/libexec/trestle/qemu-ifup"
install -D -m 0755 dist/qemu-ifdown "$d/usr/libexec/trestle/qemu-ifdown"
install -D -m 0644 dist/qemu-common "$d/usr/libexec/trestle/qemu-common"
install -D -m 0644 dist/qemu.conf "$d/usr/share/doc/trestle/examples/qemu.conf"

# Man pages and completions, written by the binary packaged (as make build
# does into bin/man and bin/completion).
gen=$(mktemp -d)
trap 'rm -rf "$stage" "$gen"' EXIT
SOURCE_DATE_EPOCH=$epoch "$bin" man "$gen/man" >/dev/null
install -d "$d/usr/share/man/man8" "$d/usr/share/man/man5"
for p in "$gen"/man/*.8; do gzip -9n <"$p" >"$d/usr/share/man/man8/$(basename "$p").gz"; done
for p in "$gen"/man/*.5; do gzip -9n <"$p" >"$d/usr/share/man/man5/$(basename "$p").gz"; done
install -d "$d/usr/share/bash-completion/completions" "$d/usr/share/zsh/vendor-completions" "$d/usr/share/fish/vendor_completions.d"
"$bin" completion bash >"$d/usr/share/bash-completion/completions/trestle"
"$bin" completion zsh >"$d/usr/share/zsh/vendor-completions/_trestle"
"$bin" completion fish >"$d/usr/share/fish/vendor_completions.d/trestle.fish"
chmod 0644 "$d"/usr/share/*/completions/trestle "$d"/usr/share/zsh/vendor-completions/_trestle "$d"/usr/share/fish/vendor_completions.d/trestle.fish

# Documentation: the documents the man pages name (README.md and docs/*.md,
# where `trestle man` says they are: /usr/share/doc/trestle), the copyright,
# a Debian changelog naming the build, and lintian's overrides, each with its
# reason. The documents stay uncompressed so that the paths the pages give
# are the files' own.
install -m 0644 README.md docs/*.md "$d/usr/share/doc/trestle/"
install -D -m 0644 dist/debian/copyright "$d/usr/share/doc/trestle/copyright"
date=$(date -R -d "@$epoch")
printf 'trestle (%s) unstable; urgency=medium\n\n  * Built from git commit %s.\n  * CHANGELOG.md in the source lists the changes.\n\n -- trestle maintainers <maintainers@users.noreply.a-seed-19884ae3.example>  %s\n' \
	"$version" "$(git rev-parse --short=12 HEAD)" "$date" | gzip -9n >"$d/usr/share/doc/trestle/changelog.gz"
install -D -m 0644 dist/debian/lintian-overrides "$d/usr/share/lintian/overrides/trestle"

# The shared libraries the binary links (the C library, if cgo is in):
# dpkg-shlibdeps' answer, from a scratch source tree it needs to run in.
shl=$(mktemp -d)
mkdir "$shl/debian" && printf 'Source: trestle\n\nPackage: trestle\nArchitecture: any\n' >"$shl/debian/control"
shlibs=$(cd "$shl" && dpkg-shlibdeps -O "$d/usr/sbin/trestle" ${cni:+"$d/usr/lib/cni/trestle"} 2>"$shl/err") ||
	fail "dpkg-shlibdeps could not name the libraries the binary links: $(tail -n 1 "$shl/err") (it comes with dpkg-dev: apt-get install dpkg-dev)"
libs=$(sed -n 's/^shlibs:Depends=//p' <<<"$shlibs")
rm -rf "$shl"

install -d "$d/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$d" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@SIZE@|$size|" \
	-e "s|@LIBS@|${libs:+$libs, }|" dist/debian/control.in >"$d/DEBIAN/control"
install -m 0644 dist/debian/conffiles "$d/DEBIAN/conffiles"
install -m 0755 dist/debian/postinst dist/debian/prerm dist/debian/postrm "$d/DEBIAN/"
(cd "$d" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$d/DEBIAN/md5sums"
chmod 0644 "$d/DEBIAN/md5sums"

mkdir -p "$out"
deb="$out/trestle_${version}_${arch}.deb"
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group "-Z${DEB_COMPRESS:-xz}" --build "$d" "$deb" >/dev/null
echo "$deb"
