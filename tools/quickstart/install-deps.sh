#!/usr/bin/env bash
# Installs the Debian packages soaheap builds with, if any is missing (uses sudo when not root).
set -euo pipefail
packages=(cmake g++ make ninja-build libspdlog-dev libfmt-dev libgtest-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev libopenmpi-dev python3 python3-matplotlib)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "soaheap: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
