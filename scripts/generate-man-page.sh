#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Writes wormholectl(1) to OUTPUT (default .build/wormholectl.1): ArgumentParser's generate-manual tool
# renders `wormholectl`'s help as mdoc, then this tidies the page so that
# `mandoc -Tlint -W warning` reports nothing: a paragraph break becomes `.Pp` (where mdoc allows
# one), and each sentence of running text starts a line.
#
#   scripts/generate-man-page.sh [debug|release] [OUTPUT]
#
# `release` (the default) renders the release build's tool (scripts/release-build.sh builds it,
# the Swift runtime linked in); `debug` the debug build's. The tool runs
# `generate-manual` (built from the swift-argument-parser checkout, a debug build) directly
# rather than through its package plugin: the plugin builds the tool itself, in release without
# `--static-swift-stdlib`, which compiles every module again and replaces the release build.
set -euo pipefail
cd "$(dirname "$0")/.."
configuration=${1:-release}
output=${2:-.build/wormholectl.1}
pages=$(mktemp -d)
log=$pages/build.log
trap 'rm -rf "$pages"' EXIT
case "$configuration" in
release) build=(scripts/release-build.sh wormholectl) ;;
debug) build=(swift build --product wormholectl) ;;
*) echo "generate-man-page.sh: the configuration is debug or release, not '$configuration'" >&2; exit 2 ;;
esac
if ! { "${build[@]}" && swift build --product generate-manual; } >"$log" 2>&1; then
    cat "$log" >&2
    exit 1
fi
tool="$(swift build -c "$configuration" --show-bin-path)/wormholectl"
"$(swift build --show-bin-path)/generate-manual" "$tool" --output-directory "$pages" \
    --date "$(date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" +%Y-%m-%d)"
mkdir -p "$(dirname "$output")"
# perl is on every Debian system (perl-base is essential).
perl -e '
    my @lines = map { chomp; $_ } <STDIN>;
    my @out;
    for my $line (@lines) {
        if ($line eq "") { push @out, ".Pp"; next }
        if ($line =~ /^[.\x27]/) { push @out, $line; next }
        # One sentence per line: break after . ! ? (and closing quotes or brackets) and spaces.
        for my $part (split /(?<=[.!?])(?<![0-9]\.)(?<=[^ ]{2})\s+(?=\S)/, $line) {
            $part = "\\&$part" if $part =~ /^[.\x27]/;
            push @out, $part;
        }
    }
    # mdoc has no paragraph break right after a section or list head, before a list item or
    # the end of a list, or twice in a row.
    my @tidy;
    for my $i (0 .. $#out) {
        if ($out[$i] eq ".Pp") {
            my $previous = @tidy ? $tidy[-1] : "";
            my $next = $i < $#out ? $out[$i + 1] : "";
            next if $previous =~ /^\.(Sh|Ss|Pp|Bl|It)\b/ || $next =~ /^\.(It|El|Sh|Ss|Pp)\b/ || $next eq "";
        }
        push @tidy, $out[$i];
    }
    print "$_\n" for @tidy;
' <"$pages/wormholectl.1" >"$output"
echo "$output"
