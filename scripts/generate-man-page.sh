#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Writes wormholectl(1) to OUTPUT (default .build/wormholectl.1): ArgumentParser's generate-manual
# plugin renders `wormholectl`'s help as mdoc, then this tidies the page so that
# `mandoc -Tlint -W warning` reports nothing: a paragraph break becomes `.Pp` (where mdoc allows
# one), and each sentence of running text starts a line. Only wormholectl.1 is kept: the plugin
# also renders the benchmark executable (`wormholectl bench --help` documents it), whose page is
# removed.
#
#   scripts/generate-man-page.sh [debug|release] [OUTPUT]
#
# `release` (the default) builds the tool in release mode first; `debug` reuses a debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
configuration=${1:-release}
output=${2:-.build/wormholectl.1}
plugin=.build/plugins/GenerateManual/outputs
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! swift package plugin generate-manual --configuration "$configuration" >"$log" 2>&1; then
    cat "$log" >&2
    exit 1
fi
rm -rf "$plugin/wormhole-bench"
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
' <"$plugin/WormholeCLI/wormholectl.1" >"$output"
echo "$output"
