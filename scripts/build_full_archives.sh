#!/usr/bin/env bash
# Build the full real archives (human and mouse) from the lab's shared GOA archive with the
# `tempo release` commands, so each release carries its manifest, dates and sha256.
#   bash scripts/build_full_archives.sh [SOURCE] [OUT]
# SOURCE defaults to ../shared/data/goa_archive, OUT to full_archives/ (git-ignored).
# Releases: the real 2014-09-29 and 2019-01-14 UniProt-GOA files, intermediate snapshots derived
# from the 2019 GAF's column 14 (marked derived), and for human the 2022-09-12 gene2go-derived
# GAF. Every release carries the Swiss-Prot 2014-01 FASTA (the only sequences available).
set -euo pipefail
SRC=${1:-../shared/data/goa_archive}
OUT=${2:-full_archives}
TEMPO=${TEMPO:-.venv/bin/tempo}
FASTA="$SRC/uniprot/uniprot_sprot_2014-01-31_human_mouse.fasta.gz"
OBO2014="$SRC/go/go_2014-10-27.obo.gz"
OBO2019="$SRC/go/go_2019-01-27.obo.gz"
OBO2022="$SRC/go/go_2022-07-01.obo.gz"

build() {  # species, derived cutoffs...
  local species=$1; shift
  local archive="$OUT/$species"
  rm -rf "$archive"
  "$TEMPO" release add "$archive" --id 2014-09-29 --gaf "$SRC/goa/goa_${species}_2014-09-29.gaf.gz" \
    --obo "$OBO2014" --fasta "$FASTA" --fasta-date 2014-01-31 --link
  "$TEMPO" release add "$archive" --id 2019-01-14 --gaf "$SRC/goa/goa_${species}_2019-01-14.gaf.gz" \
    --obo "$OBO2019" --fasta "$FASTA" --fasta-date 2014-01-31 --link
  for cutoff in "$@"; do
    "$TEMPO" release derive "$archive" --from 2019-01-14 --cutoff "$cutoff" --id "$cutoff" \
      --obo "$OBO2014" --fasta "$FASTA" --fasta-date 2014-01-31
  done
}

build human 2016-01-15 2017-06-15
"$TEMPO" release add "$OUT/human" --id 2022-09-12 --gaf "$SRC/goa/goa_human_2022-09-12.gaf.gz" \
  --obo "$OBO2022" --fasta "$FASTA" --fasta-date 2014-01-31 --provenance derived --derived \
  --note "derived from NCBI gene2go (Bioconductor org.Hs.eg.db 3.16.0); column 14 is the snapshot date" --link
build mouse 2016-01-15 2017-06-15 2018-03-15
"$TEMPO" release list "$OUT/human"
"$TEMPO" release list "$OUT/mouse"
