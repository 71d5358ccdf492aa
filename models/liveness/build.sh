#!/bin/sh
# Rebuilds models/liveness/texture-logistic.json from the project's own synthetic frames (no
# download, no outside data): models/liveness/train.ts renders the public-domain portraits of
# test/fixtures/faces live, on a screen and printed, and fits the logistic model. About 5 minutes
# on 2 cores. The result is deterministic.
set -eu
cd "$(dirname "$0")/../.."
node --import tsx models/liveness/train.ts 100
