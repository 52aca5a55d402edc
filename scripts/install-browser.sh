#!/bin/sh
# Installs Debian's Chromium and the fonts the end-to-end tests need, if they are missing.
# Playwright's own browser download cannot work here, so the Python package drives this one.
set -e
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "install-browser: not root or no apt-get; the browser tests will be skipped" >&2
    exit 0
fi
apt-get update -q
apt-get install -y -q --no-install-recommends \
    chromium chromium-driver fonts-noto-cjk fonts-noto-color-emoji
