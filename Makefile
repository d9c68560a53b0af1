# crftk: set-up, tests, demo, benchmarks and experiments.
# Data paths are variables: make conll2000 CONLL2000=/path/to/conll2000

PYTHON    ?= python3
DATA      ?= ../shared/data
CONLL2000 ?= $(DATA)/conll2000
CONLL2003 ?= $(DATA)/conll2003
OUT       ?= out
THREADS   ?= 0
CRFTK     ?= $(PYTHON) -m crftk.cli

.PHONY: all install test demo partial-pass bench bench-floor bench-direction bench-quick bench-ner ner-vectors bench-crfsuite-files bench-pipeline bench-structures bench-converge bench-compat conll2000 conll2000-rich conll2003 methods \
	convergence-figures mcef induction fuzz fuzz-model scale clean help bag-ner bag-np bag test-blas behaviour speed-change kernel-pairs bench-nbest ner-best ner-ablation \
	partial-data partial-labels semimarkov incremental

all: test

help:
	@echo "make install     build the Cython kernels and install crftk (editable) with test deps"
	@echo "make test        install, then run the test suite"
	@echo "make test-blas   the numeric tests again under another OpenBLAS kernel (BLAS_OTHER=Haswell, ...)"
	@echo "make fuzz        the fuzz properties at 100,000 cases (FUZZ_EXAMPLES=N): cases and failures"
	@echo "make demo        install, train on data/demo.train, tag data/demo.test, evaluate"
	@echo "make readme-check  every sh and python block of README.md, run on small stand-ins (in make test too)"
	@echo "make behaviour   hashes of weights, tagged outputs, logs of 38 small runs, against BASE (default: merge-base with main)"
	@echo "make speed-change  crftk's own speed against BASE (default: merge-base with main), interleaved (CONLL2000=...)"
	@echo "make kernel-pairs BASE_DIR=DIR  the kernels' speed against an old built checkout, in interleaved pairs"
	@echo "make bench-nbest BASE_DIR=DIR  the product-chain n-best kernel (exact joint -n) against an old built checkout"
	@echo "make partial-pass  one training evaluation with partial labels against fully labeled (DATA=...)"
	@echo "make bench       training s/iter, peak RSS, F1: crftk (and BASELINE=DIR, before) vs python-crfsuite at 1 and 2"
	@echo "                 threads on CoNLL-2000 (dev.txt) and CoNLL-2003 (eng.testa); BENCH_ITER iterations; floor.py if present"
	@echo "make bench-converge  the same trained to convergence (2 threads, once): F1 before/after and vs python-crfsuite"
	@echo "make conll2000   CoNLL-2000 chunking: train (cut-off 1 and 3), score dev.txt"
	@echo "make conll2000-rich  the richer chunking template on dev.txt"
	@echo "make conll2003   CoNLL-2003 NER: train on eng.train, score eng.testa (CONLL2003=...)"
	@echo "make bench-floor  memory-traffic floor of a chain training pass per layout (CONLL2000=...)"
	@echo "make bench-direction  L-BFGS's two-loop recursion alone, now and as before crftk's own products"
	@echo "make bench-pipeline  whole-process tag/train speed and memory beside python-crfsuite (CONLL2000=...)"
	@echo "make bench-structures  whole-process tag speed of every kind and decoding mode at 1 and 2 threads, outputs"
	@echo "                 compared, against the issue's goals; BASELINE=DIR: a built checkout as 'before' (CONLL2000=...)"
	@echo "make bench-compat  sklearn-crfsuite vs crftk.sklearn_crfsuite on the tutorial's NER script (CONLL2003=...)"
	@echo "make bench-crfsuite-files  crftk train --format crfsuite vs python-crfsuite on CRFsuite's chunking attributes"
	@echo "make ner-vectors  %vec lines with word vectors from eng.train's text vs the NER template (eng.testa)"
	@echo "make ner-best    the best NER model from eng.train alone (two-stage, vectors, BILOU, MCE-F); eng.testa F1"
	@echo "make ner-ablation  its ablation on eng.testa: encodings, non-local features, MCE-F, vectors"
	@echo "make partial-data  issue 35's training files: eng.train with 30/50/70% of mentions unlabeled, train.txt with 50/80% hidden"
	@echo "make partial-labels  train and tag them (PARTIAL_RUNS=patterns), eng.testa / dev.txt F1 and McNemar table"
	@echo "make semimarkov  semi-Markov CRF vs token CRF and IOB voting: dev.txt (all, NP), eng.testa; F1, McNemar, speed"
	@echo "make bench-ner   NER: crftk against python-crfsuite with tutorial features, throughput"
	@echo "make methods     Sha & Pereira's training methods on CoNLL-2000 (NP and all chunks), figures"
	@echo "make convergence-figures  redraw docs/*.png from the traces of make methods"
	@echo "make mcef        MCE-F from MAP against MAP on dev.txt and eng.testa"
	@echo "make incremental train.txt's first half, then --init on the second (grow, keep), against all at once (CONLL2000=...)"
	@echo "make induction   feature induction against all pairwise conjunctions (NER, chunking)"
	@echo "make bag-ner     feature bagging on CoNLL-2003 NER: bags, baselines, the four combinations (eng.testa)"
	@echo "make bag-np      feature bagging on CoNLL-2000 NP chunking (dev.txt); make bag: both, results table"
	@echo "make scale       Dask scale-out: tagging, data-parallel training, driver/worker/--stream memory on train.txt x SCALE_SIZES (CONLL2000=...)"
	@echo "make scale-crfsuite  python-crfsuite's peak memory on the same corpora, beside crftk's"
	@echo "make fuzz-model  bit flips in a model file: each rejected with one line or harmless (FUZZ_CASES=...)"
	@echo "make compose-conll2000  POS -> chunk pipeline: cascade vs joint vs normalized decoding on dev.txt, speed"
	@echo "make forced-decoding  dev.txt F1 with 10% / 30% of the gold labels forced (tag --force-col)"
	@echo "make compose-ner  CoNLL-2000 chunker -> CoNLL-2003 NER: no chunks, cascade, joint, normalized on eng.testa"
	@echo "make fcrf-table1  factorial CRF vs CRF+CRF vs NP CRF on corpus POS, CoNLL-2000 dev.txt (FCRF_SIZES=...)"
	@echo "make fcrf-table3  exact vs TRP vs random BP, to convergence and cut at 3 sweeps, 5% subsets"
	@echo "make fcrf-ner     three chains (POS, chunk, NER) vs the NER CRF on eng.testa (CONLL2003=...)"
	@echo "make fcrf-speed   seconds per iteration and to convergence per inference method, full CoNLL-2000"

# Rebuilt only when the build inputs change.
# pip -q is silent while the kernels compile: say what the wait is for.
# An editable install compiles no bytecode: Python writes it on a first run, unless
# PYTHONDONTWRITEBYTECODE is set, and then every start compiles crftk's modules (~0.35 s of a
# `crftk tag`); compileall writes it once (Python recompiles a module edited since, in memory).
$(OUT)/.installed: setup.py pyproject.toml $(wildcard csrc/*.pyx csrc/*.pxd csrc/*.h)
	@echo "installing crftk: building its Cython kernels (csrc/, a few minutes on 2 cores; pip is quiet meanwhile) ..."
	$(PYTHON) -m pip install -q -e '.[test]'
	$(PYTHON) -m compileall -q crftk > /dev/null
	@echo "crftk installed"
	@mkdir -p $(OUT) && touch $@

install: $(OUT)/.installed

test: install
	$(PYTHON) -m pytest -q

# The numeric tests (optimizers, objectives, structures) once more under another OpenBLAS kernel
# than the one OpenBLAS picks for this CPU (AVX2 on an AVX-512 CPU, AVX on an AVX2 one, SSE3
# otherwise): a test whose outcome depends on the BLAS kernel fails here. CI runs it after make test.
BLAS_OTHER ?= $(shell if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then echo Haswell; \
	elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then echo Sandybridge; else echo Prescott; fi)
test-blas: install
	OPENBLAS_CORETYPE=$(BLAS_OTHER) $(PYTHON) -m pytest -q tests/optimize tests/objectives tests/structures

# The fuzz properties of the test suite with the "fuzz" Hypothesis profile: 100,000 cases over
# all properties (CRFTK_FUZZ_EXAMPLES overrides), random seeds, shrinking; prints each
# property's cases, failing cases and outcome, and the total.
FUZZ_EXAMPLES ?= 100000
fuzz: install
	CRFTK_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PYTHON) -m pytest -q -p no:cacheprovider --hypothesis-profile=fuzz \
		--durations=0 tests/test_fuzz_*.py

demo: install
	$(CRFTK) train -t templates/chunking-crfpp.tmpl -m $(OUT)/demo.model --max-iter 100 data/demo.train
	$(CRFTK) tag -m $(OUT)/demo.model -o $(OUT)/demo.tagged data/demo.test
	$(CRFTK) eval $(OUT)/demo.tagged

# The README's sh and python blocks as written, in a fresh-clone layout with small stand-ins of the
# corpora (tests/test_readme.py, which make test runs too).
.PHONY: readme-check
readme-check: install
	$(PYTHON) -m pytest -q tests/test_readme.py

# Behaviour hashes (issue 32): 38 fixed runs on demo-corpus slices (every structure, algorithm and
# tag mode), each reduced to SHA-256 hashes of its weights, tagged output, normalised log and info;
# BASE is built in a temporary worktree and run interleaved with this checkout, which must load
# BASE's model files. Exit 1 when a hash differs. About 2 minutes to build BASE, 3 to run.
BASE ?= $(shell git merge-base HEAD main 2>/dev/null)
behaviour:
	@test -n "$(BASE)" || { echo "no branch main to compare with: make behaviour BASE=REV"; exit 1; }
	$(PYTHON) setup.py -q build_ext --inplace -j 2
	@mkdir -p $(OUT)
	$(PYTHON) benchmarks/behaviour.py --compare $(BASE) --out $(OUT)/behaviour.json

# Speed before/after (issue 32): chain training (s/iter, orders 1 and 2), chain tagging and factorial
# training on CoNLL-2000, each run as a whole process with BASE's code (built in a temporary worktree,
# as for make behaviour) and with this checkout's, alternating; exit 1 when head/base exceeds
# 1 + SPEED_TOLERANCE or an output differs. The other structures' tag speed:
# make bench-structures STRUCTURES_BASELINE=DIR (a built checkout of BASE: speed_change.py --keep).
SPEED_TOLERANCE ?= 0.03
speed-change:
	@test -n "$(BASE)" || { echo "no branch main to compare with: make speed-change BASE=REV"; exit 1; }
	$(PYTHON) setup.py -q build_ext --inplace -j 2
	@mkdir -p $(OUT)
	$(PYTHON) benchmarks/speed_change.py --compare $(BASE) --data $(CONLL2000) --tolerance $(SPEED_TOLERANCE) \
		--out $(OUT)/speed-change.json

# The kernels of this checkout against BASE_DIR (an old checkout built in place), in interleaved pairs.
kernel-pairs:
	@test -n "$(BASE_DIR)" || { echo "make kernel-pairs BASE_DIR=DIR (a checkout of the old revision, built in place)"; exit 1; }
	$(PYTHON) setup.py -q build_ext --inplace -j 2
	@mkdir -p $(OUT)
	$(PYTHON) benchmarks/kernel_pairs.py --baseline $(BASE_DIR) --data $(CONLL2000) --out $(OUT)/kernel-pairs.json

# The product-chain n-best kernel of this checkout against BASE_DIR's, both loaded in one process, interleaved.
bench-nbest:
	@test -n "$(BASE_DIR)" || { echo "make bench-nbest BASE_DIR=DIR (a checkout of the old revision, built in place)"; exit 1; }
	$(PYTHON) setup.py -q build_ext --inplace -j 2
	$(PYTHON) benchmarks/product_nbest.py --kernel $(firstword $(wildcard $(BASE_DIR)/crftk/_product*.so)) \
		--kernel $(firstword $(wildcard crftk/_product*.so)) --threads 1,2

# One training evaluation with partial labels against the same one fully labeled (issue 35: at most
# 1.1x), on CoNLL-2000 and CoNLL-2003 with 10/50/80% of the labels unknown.
partial-pass:
	$(PYTHON) setup.py -q build_ext --inplace -j 2
	$(PYTHON) benchmarks/partial_pass.py --data $(DATA) --threads 2

# crftk against python-crfsuite (issue 38's evidence): seconds per L-BFGS iteration and peak RSS at 1 and
# 2 threads, CoNLL-2000 (CRF++ template) and CoNLL-2003 (NER template), medians of BENCH_REPEATS runs, the
# BASELINE checkout (a built one, optional) trained interleaved as "before"; dev.txt / eng.testa F1 of each
# model after BENCH_ITER iterations (bench-converge: to convergence, for the F1-within-0.02 check). Then
# the memory-traffic floor (make bench-floor) when benchmarks/floor.py exists and BENCH_FLOOR=1.
BASELINE ?= $(STRUCTURES_BASELINE)
BENCH_ITER ?= 30
BENCH_REPEATS ?= 3
BENCH_FLOOR ?= 1
BENCH_ARGS = --data $(CONLL2000) --ner-data $(CONLL2003) --corpora conll2000,conll2003 --no-blas1 \
	$(if $(BASELINE),--baseline $(BASELINE))
bench: install
	$(PYTHON) -m pip install -q python-crfsuite
	$(PYTHON) benchmarks/bench_crfsuite.py $(BENCH_ARGS) --iterations $(BENCH_ITER) --repeats $(BENCH_REPEATS) \
		--out $(OUT)/bench-crfsuite.json --md benchmarks/results/bench.md
	$(if $(and $(wildcard benchmarks/floor.py),$(filter 1,$(BENCH_FLOOR))),$(MAKE) bench-floor)

bench-converge: install
	$(PYTHON) -m pip install -q python-crfsuite
	$(PYTHON) benchmarks/bench_crfsuite.py $(BENCH_ARGS) --converge --out $(OUT)/bench-converge.json \
		--md benchmarks/results/bench-converge.md

bench-quick: install
	$(PYTHON) -m pip install -q python-crfsuite
	$(PYTHON) benchmarks/bench_crfsuite.py --data $(CONLL2000) --quick --out $(OUT)/bench-quick.json

# CoNLL-2000 chunking with the CRF++-style template, L2 (c2=1), cut-off 1 and 3.
conll2000: install
	@test -f $(CONLL2000)/train.txt || { echo "CoNLL-2000 not found in $(CONLL2000): set CONLL2000=DIR"; exit 1; }
	for f in 1 3; do \
	  $(CRFTK) train -t templates/chunking-crfpp.tmpl -m $(OUT)/conll2000-f$$f.model --min-freq $$f \
	    --threads $(THREADS) --dev $(CONLL2000)/dev.txt $(CONLL2000)/train.txt 2> $(OUT)/conll2000-f$$f.log || exit 1; \
	  tail -3 $(OUT)/conll2000-f$$f.log; \
	  $(CRFTK) tag -m $(OUT)/conll2000-f$$f.model -o $(OUT)/conll2000-f$$f.dev.tagged $(CONLL2000)/dev.txt || exit 1; \
	  $(CRFTK) eval $(OUT)/conll2000-f$$f.dev.tagged | tee $(OUT)/conll2000-f$$f.dev.eval; \
	done

# The richer chunking template against the CRF++-style one (make conll2000), same settings.
conll2000-rich: install
	@test -f $(CONLL2000)/train.txt || { echo "CoNLL-2000 not found in $(CONLL2000): set CONLL2000=DIR"; exit 1; }
	$(CRFTK) train -t templates/chunking-rich.tmpl -m $(OUT)/conll2000-rich.model --threads $(THREADS) \
	  --dev $(CONLL2000)/dev.txt $(CONLL2000)/train.txt 2> $(OUT)/conll2000-rich.log
	tail -3 $(OUT)/conll2000-rich.log
	$(CRFTK) tag -m $(OUT)/conll2000-rich.model -o $(OUT)/conll2000-rich.dev.tagged $(CONLL2000)/dev.txt
	$(CRFTK) eval $(OUT)/conll2000-rich.dev.tagged | tee $(OUT)/conll2000-rich.dev.eval

# CoNLL-2003 English NER with the shipped template; eng.testa is the development set.
conll2003: install
	@test -f $(CONLL2003)/eng.train || { echo "CoNLL-2003 not found in $(CONLL2003): set CONLL2003=DIR"; exit 1; }
	$(CRFTK) train -t templates/conll2003-ner.tmpl -m $(OUT)/conll2003.model --threads $(THREADS) \
	  $(CONLL2003)/eng.train 2> $(OUT)/conll2003.log
	tail -3 $(OUT)/conll2003.log
	$(CRFTK) tag -m $(OUT)/conll2003.model -o $(OUT)/conll2003.testa.tagged $(CONLL2003)/eng.testa
	$(CRFTK) eval $(OUT)/conll2003.testa.tagged | tee $(OUT)/conll2003.testa.eval

# the memory-traffic floor of a chain training pass per layout, beside crftk's evaluation (issue 38)
bench-floor: install
	$(PYTHON) benchmarks/floor.py --data $(CONLL2000) --out benchmarks/results/floor

# L-BFGS's two-loop recursion alone (issue 38): the factorial CRF's 670k weights x 50 pairs, then the
# chain's 457k x 6, against the recursion before crftk summed its own products (written out in the script)
bench-direction: install
	$(PYTHON) benchmarks/lbfgs_direction.py --size 670448 --pairs 50
	$(PYTHON) benchmarks/lbfgs_direction.py --size 456766 --pairs 6

# Whole-pipeline speed (issue 19): crftk tag as a whole process on dev.txt x 20, training read +
# encode, s/iter and memory, beside python-crfsuite in the same run; results in benchmarks/results.
bench-pipeline: install
	$(PYTHON) -m pip install -q python-crfsuite
	$(PYTHON) benchmarks/pipeline.py --data $(CONLL2000) --ner-data $(CONLL2003) --ner \
		--out benchmarks/results/pipeline

# Tagging speed of every model kind and decoding mode (issues 19, 38), whole process on dev.txt x 20 at 1
# and 2 threads, each case's goal met or not; BASELINE=DIR: another checkout, built in place, as "before"
# (interleaved, outputs compared byte for byte). Models: $(OUT)/structures, filled from STRUCTURES_MODELS (a
# directory of trained ones, optional) and make fcrf-table1's, the rest trained once (STRUCTURES_ITER
# iterations). STRUCTURES_CASES='name;name' runs some cases only (python benchmarks/structures.py -h: the names).
STRUCTURES_ITER ?= 50
STRUCTURES_REPEATS ?= 3
bench-structures: install
	$(PYTHON) benchmarks/structures.py --data $(CONLL2000) --out $(OUT)/structures --fcrf-model $(OUT)/fcrf/8936/fcrf.model \
		--pipeline $(OUT)/fcrf/8936/cascade.pipeline --iterations $(STRUCTURES_ITER) --repeats $(STRUCTURES_REPEATS) \
		$(if $(STRUCTURES_MODELS),--models-from $(STRUCTURES_MODELS)) $(if $(STRUCTURES_CASES),--cases '$(STRUCTURES_CASES)') \
		$(if $(BASELINE),--baseline $(BASELINE)) --results benchmarks/results/structures

# sklearn-crfsuite's tutorial script with the real sklearn_crfsuite.CRF and with crftk.sklearn_crfsuite.CRF
# (1 and 2 threads) on CoNLL-2003: fit time and F1 on eng.testa, medians of COMPAT_RUNS runs (a few minutes each).
COMPAT_RUNS ?= 3
bench-compat: install
	$(PYTHON) -m pip install -q -e '.[compat]'
	$(PYTHON) benchmarks/sklearn_compat.py --data $(CONLL2003) --runs $(COMPAT_RUNS)

# crftk train --format crfsuite against python-crfsuite on CRFsuite data files made by CRFsuite's own
# chunking attribute extractor (example/chunking.py, from python-crfsuite's sdist, fetched into $(OUT)).
bench-crfsuite-files: install
	$(PYTHON) -m pip install -q python-crfsuite
	@mkdir -p $(OUT)/crfsuite-sdist
	@ls $(OUT)/crfsuite-sdist/*/crfsuite/example/chunking.py >/dev/null 2>&1 || { \
		$(PYTHON) -m pip download -q --no-deps --no-binary :all: python-crfsuite==0.9.12 -d $(OUT)/crfsuite-sdist && \
		tar -xzf $(OUT)/crfsuite-sdist/python_crfsuite-0.9.12.tar.gz -C $(OUT)/crfsuite-sdist; }
	$(PYTHON) benchmarks/crfsuite_files.py --data $(CONLL2000) --runs $(COMPAT_RUNS) \
		--extractor $$(ls $(OUT)/crfsuite-sdist/*/crfsuite/example/chunking.py | head -1)

# Real values end to end on NER: word vectors from eng.train's own text (PPMI + SVD, no outside
# data; benchmarks/svd_vectors.py) in %vec lines (templates/conll2003-vectors.tmpl) against the NER
# template alone, on eng.testa with McNemar's test.
ner-vectors: install
	@mkdir -p $(OUT)/nervec
	$(PYTHON) benchmarks/svd_vectors.py -o $(OUT)/nervec/ner.vec $(CONLL2003)/eng.train
	$(CRFTK) train -q -t templates/conll2003-ner.tmpl -m $(OUT)/nervec/base.model --threads $(THREADS) $(CONLL2003)/eng.train
	$(CRFTK) train -q -t templates/conll2003-vectors.tmpl --vectors emb=$(OUT)/nervec/ner.vec --vectors-lookup lowercase \
		-m $(OUT)/nervec/vec.model --threads $(THREADS) $(CONLL2003)/eng.train
	$(CRFTK) tag -m $(OUT)/nervec/base.model -o $(OUT)/nervec/base.testa $(CONLL2003)/eng.testa
	$(CRFTK) tag -m $(OUT)/nervec/vec.model -o $(OUT)/nervec/vec.testa $(CONLL2003)/eng.testa
	$(CRFTK) eval $(OUT)/nervec/base.testa | head -2
	$(CRFTK) eval --mcnemar $(OUT)/nervec/base.testa $(OUT)/nervec/vec.testa

# The best CoNLL-2003 NER model from eng.train alone (issue 34), all on BILOU labels, with word
# vectors from eng.train's own text: the first stage is the local CRF (MAP, then MCE-F); the second
# stage reads its out-of-fold labels (5 folds of documents, each repeating both training steps)
# through document- and corpus-level majorities (Krishnan & Manning 2006), beside context
# aggregation (Ratinov & Roth 2009). Against the first stage alone, the same configuration
# without the non-local features (McNemar), on eng.testa.
NER_BEST = $(OUT)/ner-best
MCEF_OPTIONS = --objective mce-f --algorithm quickprop --c2 5e-7 --first-step 0.01 --max-iter 40
ner-best: install
	@test -f $(CONLL2003)/eng.train || { echo "CoNLL-2003 not found in $(CONLL2003): set CONLL2003=DIR"; exit 1; }
	@mkdir -p $(NER_BEST)
	test -f $(NER_BEST)/ner.vec || $(PYTHON) benchmarks/svd_vectors.py -o $(NER_BEST)/ner.vec $(CONLL2003)/eng.train
	$(CRFTK) train -q -t templates/conll2003-vectors.tmpl --vectors emb=$(NER_BEST)/ner.vec --vectors-lookup lowercase \
	  --train-scheme bilou -m $(NER_BEST)/first-map.model --threads $(THREADS) $(CONLL2003)/eng.train
	$(CRFTK) train -q --init $(NER_BEST)/first-map.model $(MCEF_OPTIONS) --train-scheme bilou \
	  -m $(NER_BEST)/first.model --threads $(THREADS) $(CONLL2003)/eng.train
	$(CRFTK) train -t templates/conll2003-ner-best.tmpl --vectors emb=$(NER_BEST)/ner.vec --vectors-lookup lowercase \
	  --train-scheme bilou --first-stage $(NER_BEST)/first.model --first-stage-folds 5 \
	  --first-stage-output $(NER_BEST)/first.oof -m $(NER_BEST)/ner-best.model --threads $(THREADS) \
	  $(CONLL2003)/eng.train 2> $(NER_BEST)/ner-best.log
	$(CRFTK) tag -m $(NER_BEST)/first.model -o $(NER_BEST)/first.testa $(CONLL2003)/eng.testa
	$(CRFTK) tag -m $(NER_BEST)/ner-best.model -o $(NER_BEST)/ner-best.testa $(CONLL2003)/eng.testa
	$(CRFTK) eval $(NER_BEST)/first.testa | head -2
	$(CRFTK) eval $(NER_BEST)/ner-best.testa | head -2
	$(CRFTK) eval --mcnemar $(NER_BEST)/first.testa $(NER_BEST)/ner-best.testa | tail -4

ner-ablation: install
	$(PYTHON) benchmarks/ner_best.py run --data $(CONLL2003) --out $(OUT)/ner-ablation --threads $(THREADS)
	$(PYTHON) benchmarks/ner_best.py report --out $(OUT)/ner-ablation --results benchmarks/results/ner-best.md

# Partial labels (issue 35): benchmarks/partial_labels.py writes the training files under
# PARTIAL_OUT (never in the repository), trains and tags each setting one at a time (a step whose
# output exists is skipped), then the table (benchmarks/results/partial-labels.md).
# PARTIAL_RUNS: shell patterns of the runs (default: all), e.g. PARTIAL_RUNS="'ner-*-[cd]' 'chunk-*-partial'".
PARTIAL_OUT ?= $(OUT)/partial
PARTIAL_RUNS ?=
PARTIAL = $(PYTHON) benchmarks/partial_labels.py --conll2000 $(CONLL2000) --conll2003 $(CONLL2003) --out $(PARTIAL_OUT)
partial-data: install
	@test -f $(CONLL2003)/eng.train || { echo "CoNLL-2003 not found in $(CONLL2003): set CONLL2003=DIR"; exit 1; }
	@test -f $(CONLL2000)/train.txt || { echo "CoNLL-2000 not found in $(CONLL2000): set CONLL2000=DIR"; exit 1; }
	$(PARTIAL) make-data

partial-labels: install
	test -f $(PARTIAL_OUT)/data.json || $(MAKE) partial-data
	$(PARTIAL) run --threads $(THREADS) $(PARTIAL_RUNS)
	$(PARTIAL) report

# Semi-Markov CRFs (issue 36): benchmarks/semimarkov.py trains and tags the token CRF, the five
# scheme models voted on (Shen & Sarkar) and the semi-Markov CRFs on CoNLL-2000 all phrases and NP
# (dev.txt) and CoNLL-2003 (eng.testa), one thread each, into SEMIMARKOV_OUT (derived files too;
# a run whose output exists is skipped); then CPU seconds per iteration at L=6 and the tables
# (benchmarks/results/semimarkov.md). SEMIMARKOV_RUNS: shell patterns of the runs (default all).
SEMIMARKOV_OUT ?= $(OUT)/semimarkov
SEMIMARKOV_RUNS ?=
SEMIMARKOV = $(PYTHON) benchmarks/semimarkov.py --conll2000 $(CONLL2000) --conll2003 $(CONLL2003) --out $(SEMIMARKOV_OUT)
semimarkov: install
	@test -f $(CONLL2000)/train.txt || { echo "CoNLL-2000 not found in $(CONLL2000): set CONLL2000=DIR"; exit 1; }
	@test -f $(CONLL2003)/eng.train || { echo "CoNLL-2003 not found in $(CONLL2003): set CONLL2003=DIR"; exit 1; }
	$(SEMIMARKOV) run $(SEMIMARKOV_RUNS)
	$(SEMIMARKOV) speed
	$(SEMIMARKOV) report

bench-ner: install
	$(PYTHON) -m pip install -q python-crfsuite
	$(PYTHON) benchmarks/bench_ner.py all --data $(CONLL2003) --workdir $(OUT)/bench-ner \
		--out $(OUT)/bench-ner.json

# Training methods side by side (about 40 minutes on 2 cores); the figures need matplotlib.
BATCH_METHODS = lbfgs pcg mixed-cg cg gis
methods: install
	$(PYTHON) -m pip install -q matplotlib
	$(PYTHON) benchmarks/methods.py --data $(CONLL2000) --task np --out $(OUT)/methods-np
	$(PYTHON) benchmarks/methods.py --data $(CONLL2000) --task all --out $(OUT)/methods-all \
	  --methods lbfgs,pcg,mixed-cg,cg,gis,perceptron,sgd,memm
	$(MAKE) convergence-figures

convergence-figures:
	@mkdir -p docs
	for task in np all; do \
	  $(PYTHON) benchmarks/plot_convergence.py -o docs/convergence-$$task --title "CoNLL-2000 $$task" --max-passes 300 \
	    $(foreach m,$(BATCH_METHODS),$(m)=$(OUT)/methods-$$task/$(m).trace.tsv) || exit 1; \
	done

# MCE-F (Suzuki et al.) from MAP models: CoNLL-2000 dev.txt and CoNLL-2003 eng.testa.
incremental: install
	@test -f $(CONLL2000)/train.txt || { echo "CoNLL-2000 not found in $(CONLL2000): set CONLL2000=DIR"; exit 1; }
	$(PYTHON) benchmarks/incremental.py --data $(CONLL2000) --out $(OUT)/incremental --max-iter 500 --epochs 10 --threads 2

mcef: install
	$(PYTHON) benchmarks/mcef.py --task chunk --data $(CONLL2000) --out $(OUT)/mcef
	$(PYTHON) benchmarks/mcef.py --task ner --data $(CONLL2003) --out $(OUT)/mcef

# Feature induction (McCallum & Li) against fixed pairwise conjunctions.
induction: install
	$(PYTHON) benchmarks/induce.py --task ner --data $(CONLL2003) --out $(OUT)/induce --variants paper,atomic,heldout,l1
	$(PYTHON) benchmarks/induce.py --task chunk --data $(CONLL2000) --out $(OUT)/induce --variants paper,atomic,heldout

# Feature bagging (Sutton, Sindelar & McCallum 2006): the bag templates' lexicons are built in
# out/bag/<task> of this checkout (the templates name them relative to templates/).
BAG_ITER ?= 400
bag-ner: install
	nice $(PYTHON) benchmarks/bag.py --task ner --data $(CONLL2003) --out $(OUT)/bag --max-iter $(BAG_ITER) --threads $(or $(filter-out 0,$(THREADS)),2)

bag-np: install
	nice $(PYTHON) benchmarks/bag.py --task np --data $(CONLL2000) --out $(OUT)/bag --max-iter $(BAG_ITER) --threads $(or $(filter-out 0,$(THREADS)),2) --cv 2

bag: bag-ner bag-np
	nice $(PYTHON) benchmarks/bag.py --parallel --out $(OUT)/bag --threads 2
	$(PYTHON) benchmarks/bag.py --report $(OUT)/bag/ner/bag.json $(OUT)/bag/np/bag.json --results benchmarks/results/bag

# Scale-out on Dask (crftk.distributed): tagging throughput and peak worker memory on dev.txt x 1, 5, 20,
# seconds and bytes per training iteration with 1 and 2 workers against local threads; results in
# benchmarks/results/scale.md (and .json). SCALE_ITER: training iterations timed. Training memory:
# train.txt x SCALE_SIZES (benchmarks/scale_corpus.py, word types growing as tokens^SCALE_HEAPS),
# SCALE_MEM_ITER L-BFGS iterations on a scheduler and 2 workers of their own, then perceptron
# --stream; SCALE_SECTIONS: of tagging,memory,training,train-memory (the others are kept); SCALE_RUNS: of
# cluster,stream,memory.
SCALE_ITER ?= 20
SCALE_SIZES ?= 1,5,20,50
SCALE_HEAPS ?= 0.6
SCALE_MEM_ITER ?= 3
SCALE_SECTIONS ?= tagging,memory,training,train-memory
SCALE_RUNS ?= cluster,stream,memory
scale: install
	$(PYTHON) benchmarks/scale.py --data $(CONLL2000) --work $(OUT)/scale --iterations $(SCALE_ITER) \
		--sections $(SCALE_SECTIONS) --sizes $(SCALE_SIZES) --heaps $(SCALE_HEAPS) \
		--memory-iterations $(SCALE_MEM_ITER) --runs $(SCALE_RUNS) --out benchmarks/results/scale

# python-crfsuite's peak memory for one perceptron epoch on the same train.txt x SCALE_SIZES, beside
# crftk's rows of benchmarks/results/scale.json (needs python-crfsuite: pip install python-crfsuite);
# results in benchmarks/results/scale-crfsuite.md
.PHONY: scale-crfsuite
scale-crfsuite: install
	$(PYTHON) benchmarks/crfsuite_memory.py --data $(CONLL2000) --work $(OUT)/scale --sizes $(SCALE_SIZES) \
		--heaps $(SCALE_HEAPS) --out benchmarks/results/scale-crfsuite

# Every single-bit flip of a small model's header, FUZZ_CASES random 1-16 bit flips and a sample
# through the CLI; runs this checkout's code in place (the Cython kernels built in place).
FUZZ_CASES ?= 10000
# Composition (issue 15, Sutton & McCallum 2005): separately trained stages decoded in cascade or
# jointly. Models trained with at most COMPOSE_ITER L-BFGS iterations; results in
# benchmarks/results/compose.md (+ .json). compose-ner needs compose-conll2000's chunker.
.PHONY: compose-conll2000 compose-ner
COMPOSE_ITER ?= 100
compose-conll2000: install
	@test -f $(CONLL2000)/train.txt || { echo "CoNLL-2000 not found in $(CONLL2000): set CONLL2000=DIR"; exit 1; }
	$(PYTHON) benchmarks/compose.py conll2000 --data $(CONLL2000) --out $(OUT)/compose \
	  --max-iter $(COMPOSE_ITER) --threads $(THREADS)
	$(PYTHON) benchmarks/compose.py report --out $(OUT)/compose --results benchmarks/results/compose

# Constrained decoding (issue 35): dev.txt tagged with 10% and 30% of its gold labels forced
# (tag --force-col), against plain tagging; the chunking model is trained once into $(OUT)/forced.
# Results in benchmarks/results/forced-decoding.md.
.PHONY: forced-decoding
forced-decoding: install
	@test -f $(CONLL2000)/train.txt || { echo "CoNLL-2000 not found in $(CONLL2000): set CONLL2000=DIR"; exit 1; }
	mkdir -p $(OUT)/forced
	$(PYTHON) benchmarks/forced_decoding.py --data-dir $(CONLL2000) --model $(OUT)/forced/chunk-crfpp.model \
	  --seed 0 --fractions 0.1,0.3 --threads $(THREADS) --out benchmarks/results/forced-decoding.md

compose-ner: compose-conll2000
	@test -f $(CONLL2003)/eng.train || { echo "CoNLL-2003 not found in $(CONLL2003): set CONLL2003=DIR"; exit 1; }
	$(PYTHON) benchmarks/compose.py ner --data $(CONLL2003) --out $(OUT)/compose \
	  --chunker $(OUT)/compose/chunk-crfpp.model --max-iter $(COMPOSE_ITER) --threads $(THREADS)
	$(PYTHON) benchmarks/compose.py report --out $(OUT)/compose --results benchmarks/results/compose

fuzz-model:
	$(PYTHON) setup.py build_ext --inplace -q
	$(PYTHON) fuzz/model_bitflips.py --cases $(FUZZ_CASES) --seed 1 --cli 50

clean:
	rm -rf build $(OUT) crftk/*.so csrc/*.c

# Factorial CRFs (issue 16, Sutton et al. 2004): benchmarks/fcrf.py; every step is skipped when its
# output exists. Results in benchmarks/results/fcrf.md (+ .json). Runs this checkout's code in place
# (build the kernels first: python setup.py build_ext --inplace).
.PHONY: fcrf-table1 fcrf-table3 fcrf-ner fcrf-speed fcrf-report
FCRF_SIZES ?= 8936
FCRF_ITER ?= 1000
FCRF_THREADS ?= 2
# fcrf-speed trains to convergence: a cap above the ~1,100 iterations TRP needs on train.txt
FCRF_SPEED_ITER ?= 2000
# FCRF_HISTORY=N: the factorial trainings' L-BFGS pairs (unset: crftk's factorial default, 50; the
# README's Tables 1 and 3 were made with 6, the default then)
FCRF_ARGS = --out $(OUT)/fcrf --max-iter $(FCRF_ITER) --threads $(FCRF_THREADS) $(if $(FCRF_HISTORY),--history $(FCRF_HISTORY))
fcrf-table1:
	@test -f $(CONLL2000)/train.txt || { echo "CoNLL-2000 not found in $(CONLL2000): set CONLL2000=DIR"; exit 1; }
	$(PYTHON) benchmarks/fcrf.py table1 --data $(CONLL2000) $(FCRF_ARGS) --sizes $(FCRF_SIZES)
	$(PYTHON) benchmarks/fcrf.py report --out $(OUT)/fcrf --results benchmarks/results/fcrf

fcrf-table3:
	$(PYTHON) benchmarks/fcrf.py table3 --data $(CONLL2000) $(FCRF_ARGS)
	$(PYTHON) benchmarks/fcrf.py report --out $(OUT)/fcrf --results benchmarks/results/fcrf

fcrf-ner:
	@test -f $(CONLL2003)/eng.train || { echo "CoNLL-2003 not found in $(CONLL2003): set CONLL2003=DIR"; exit 1; }
	$(PYTHON) benchmarks/fcrf.py ner --data $(CONLL2003) $(FCRF_ARGS)
	$(PYTHON) benchmarks/fcrf.py report --out $(OUT)/fcrf --results benchmarks/results/fcrf

# seconds per iteration (20 iterations of each method), then trp and bp to convergence (exact to
# convergence is Table 1's 8936 row)
fcrf-speed:
	$(PYTHON) benchmarks/fcrf.py speed --data $(CONLL2000) --out $(OUT)/fcrf --max-iter 20 --threads $(FCRF_THREADS) $(if $(FCRF_HISTORY),--history $(FCRF_HISTORY))
	$(PYTHON) benchmarks/fcrf.py speed --data $(CONLL2000) --out $(OUT)/fcrf --max-iter $(FCRF_SPEED_ITER) --threads $(FCRF_THREADS) --methods trp bp trp-warm $(if $(FCRF_HISTORY),--history $(FCRF_HISTORY))
	$(PYTHON) benchmarks/fcrf.py report --out $(OUT)/fcrf --results benchmarks/results/fcrf
