#!/usr/bin/env bash
# The sources of redis's and memcached's own test suites, for tests/app_suites.rs: Debian's
# source packages of the versions installed (`apt-get source`, which needs a deb-src line:
# .ci/run adds one), unpacked into target/app-suites/{redis,memcached}, and memcached built
# there (its t/ harness starts ./memcached-debug and ./timedrun). Runs as any user; run it
# again after the packages are upgraded. Needs: dpkg-dev, gcc, make, libevent-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/app-suites
mkdir -p "$dir"

# The source version of the installed binary package $1 (epoch included, as apt-get wants it).
installed_source_version() {
  dpkg-query -W -f='${source:Version}' "$1" 2>/dev/null \
    || { echo "app-suites: $1 is not installed (apt-get install $1)" >&2; exit 1; }
}

# Unpacks source package $1 at version $2 into $dir/$1, unless that version is already there.
# The stamp file is written last: a directory without it is a half-done fetch, done again.
fetch() {
  local name=$1 version=$2 stamp="$dir/$1/.corelane-source-version"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version" ]; then
    echo "app-suites: $name $version already in $dir/$name"
    return
  fi
  local staging
  staging=$(mktemp -d "$dir/.fetch-$name.XXXXXX")
  chmod 755 "$staging" # apt downloads as _apt where it can
  if ! (cd "$staging" && apt-get source -qq "$name=$version" >/dev/null); then
    rm -rf "$staging"
    echo "app-suites: apt-get source $name=$version failed; it needs a deb-src line for the" \
      "installed version's suite in /etc/apt/sources.list.d/ (as .ci/run adds) and apt-get update" >&2
    exit 1
  fi
  local upstream=${version#*:}
  upstream=${upstream%-*}
  rm -rf "${dir:?}/$name"
  mv "$staging/$name-$upstream" "$dir/$name"
  rm -rf "$staging"
  echo "$version" >"$stamp"
  echo "app-suites: $name $version unpacked into $dir/$name"
}

# memcached's test binary and the harness's timer, built as `make test` would (about 30 s
# on 2 CPUs): ./configure's defaults, no TLS or SASL (their tests skip themselves).
build_memcached() {
  local src="$dir/memcached"
  if [ -x "$src/memcached-debug" ] && [ -x "$src/timedrun" ] && [ "$src/memcached-debug" -nt "$src/.corelane-source-version" ]; then
    echo "app-suites: memcached-debug already built"
    return
  fi
  (cd "$src" && ./configure -q >configure.log 2>&1 && make -s -j"$(nproc)" memcached-debug timedrun >make.log 2>&1) || {
    echo "app-suites: building memcached failed (see $src/configure.log and $src/make.log;" \
      "it needs gcc, make and libevent-dev)" >&2
    exit 1
  }
  echo "app-suites: built $src/memcached-debug"
}

fetch redis "$(installed_source_version redis-server)"
fetch memcached "$(installed_source_version memcached)"
build_memcached
