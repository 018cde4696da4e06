/*
 * profile.c - the profile table (profile.h): a built-in copy of
 * traces/profile-pytorch.tsv and a reader for tables in that format.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goldminer/profile.h"
#include "goldminer/util.h"

static const struct gm_profile_class builtin[] = {
    {"resnet50", 1200, 321.1295506, 0.25,
     "checked: NVIDIA DeepLearningExamples, "
     "PyTorch/Classification/ConvNets/resnet50v1.5/README.md, table 'Training "
     "performance: NVIDIA DGX-1 16GB (8x V100 16GB)', 1 GPU, Throughput - mixed "
     "precision: 1200 img/s (pytorch-21.03 NGC container)",
     "measured: goldminer profile --class resnet50 2026-12-01 (python3 -m "
     "goldminer.profile_classes torchvision, 1 pinned vCPU of AMD EPYC): 1500 images "
     "in 4.67 s CPU; /var/tmp/goldminer-photos (1500 JPEGs): PIL decode, "
     "RandomResizedCrop 224, flip, ToTensor, normalise (torchvision), torch "
     "DataLoader with 1 worker process, batches of 64, both processes' CPU",
     0, 0},
    {"cv-light", 1401, 361.876592, 0.15,
     "checked: NVIDIA DeepLearningExamples at commit "
     "0107cf27e71bbb6a49f0d89bdb843c97ce41098d, "
     "PyTorch/Classification/ConvNets/efficientnet/README.md, table 'Training "
     "performance: NVIDIA DGX-1 (8x V100 32GB)' (PyTorch 21.03 NGC container), "
     "efficientnet-b0, 1 GPU, Throughput - mixed precision: 1401 img/s "
     "(EfficientNet-B0 stands for the light vision models: no ResNet-18, AlexNet or "
     "ShuffleNet table was found)",
     "measured: goldminer profile --class cv-light 2026-12-01 (python3 -m "
     "goldminer.profile_classes torchvision, 1 pinned vCPU of AMD EPYC): 1500 images "
     "in 4.15 s CPU; /var/tmp/goldminer-photos (1500 JPEGs): PIL decode, "
     "RandomResizedCrop 224, flip, ToTensor, normalise (torchvision), torch "
     "DataLoader with 1 worker process, batches of 64, both processes' CPU",
     0, 0},
    {"vit", 300, 299.5194545, 0.1,
     "assumption: ViT-B/16 at 224 px, mixed precision, ~300 images/s per V100 (from "
     "A100 figures at ~3x; no source named or checked)",
     "measured: goldminer profile --class vit 2026-12-01 (python3 -m "
     "goldminer.profile_classes randaugment, 1 pinned vCPU of AMD EPYC): 1500 images "
     "in 5.01 s CPU; /var/tmp/goldminer-photos (1500 JPEGs): PIL decode, "
     "RandomResizedCrop 224, flip, RandAugment(2, 9), ToTensor, normalise, "
     "RandomErasing 0.25 (torchvision), torch DataLoader with 1 worker process, "
     "batches of 64, both processes' CPU",
     0, 0},
    {"nlp", 164, 15878.10728, 0.2,
     "checked: NVIDIA DeepLearningExamples, PyTorch/LanguageModeling/BERT/README.md, "
     "table 'Pre-training NVIDIA DGX-1 With 16G' (pytorch:20.06-py3), 1 GPU, "
     "sequence length 128, Throughput - mixed precision: 164 sequences/s (the row "
     "said 400, which no table there shows; its SQuAD fine-tuning table, sequence "
     "length 384, shows 50 per V100 16G)",
     "measured: goldminer profile --class nlp 2026-12-01 (python3 -m "
     "goldminer.profile_classes text, 1 pinned vCPU of AMD EPYC): 20104 sequences of "
     "128 tokens in 1.27 s CPU; /usr/share/common-licenses (14 files, 34130 tokens): "
     "tokenised BERT-style (basic tokeniser: NFD, lower case, words and punctuation "
     "apart; vocabulary lookup), packed into sequences of 128 ids with [CLS]/[SEP], "
     "the last of a file padded, plus the mask, batches of 64 (98% of the ids are "
     "text)",
     0, 0},
    {"speech", 44.65, 57.76056388, 0.1,
     "checked: NVIDIA DeepLearningExamples at commit "
     "48dc9adacd401a3f414400bee061dc9e0fc86b3f, "
     "PyTorch/SpeechRecognition/QuartzNet/README.md, table 'Training performance: "
     "NVIDIA DGX-2 (16x V100 32GB)' (PyTorch 21.07-py3 NGC container), batch 24 per "
     "GPU, 1 GPU, Throughput - mixed precision: 44.65 (items = LibriSpeech "
     "utterances per second; FP32 67.95)",
     "measured: goldminer profile --class speech 2026-12-01 (python3 -m "
     "goldminer.profile_classes speech, 1 pinned vCPU of AMD EPYC): 104 utterances "
     "in 1.80 s CPU; /usr/share/sounds/freedesktop/stereo (27 clips, 35 s) as 8 "
     "utterances of 12.69 s (LibriSpeech's mean), 16 kHz mono FLAC (libsndfile): "
     "decode, pre-emphasis, 25/10 ms Hann frames, |FFT|^2, 80 log-mel bands, "
     "normalise, SpecAugment",
     0, 0},
    {"recsys", 875000, 190119.9705, 0.2,
     "checked: NVIDIA DeepLearningExamples, PyTorch/Recommendation/DLRM/README.md, "
     "table 'Training performance: NVIDIA DGX-1 (8x V100 32G)', 1 GPU, batch 32k, "
     "mixed precision: 875k samples/s (a DLRM on Criteo rows; the row used to assume "
     "1e5 for a DeepFM-class model)",
     "measured: goldminer profile --class recsys 2026-12-01 (python3 -m "
     "goldminer.profile_classes criteo, 1 pinned vCPU of AMD EPYC): 100000 rows in "
     "0.53 s CPU; 20000 rows in Criteo's layout from profile_classes' seeded "
     "generator (synthetic values, real parsing): split, integers log(1 + x), 26 hex "
     "ids hashed mod 10M, batches of 64",
     0, 0},
};

void gm_profile_default(struct gm_profile *p)
{
	memset(p, 0, sizeof(*p));
	p->n = (int)(sizeof(builtin) / sizeof(builtin[0]));
	memcpy(p->c, builtin, sizeof(builtin));
}

/* Split line at its tabs into fld: the number of fields, 9 when there are more
 * than eight. */
static int split_fields(char *line, char *fld[8])
{
	char *s = line;
	int nf = 0;

	for (;;) { /* six to eight fields; nf = 9 flags a ninth */
		if (nf == 8) {
			nf = 9;
			break;
		}
		fld[nf++] = s;
		char *t = strchr(s, '\t');
		if (!t)
			break;
		*t = 0;
		s = t + 1;
	}
	return nf;
}

/* One class line (line lineno of path, neither blank nor a comment) appended to p.
 * 0, or -EBADMSG with the line and what is wrong with it in err. */
static int parse_class(struct gm_profile *p, char *line, const char *path, unsigned lineno,
		       char *err, size_t errlen)
{
	char *fld[8], *end[3];
	int nf = split_fields(line, fld);
	struct gm_profile_class *c = &p->c[p->n];

	if (nf < 6 || nf > 8) {
		gm_errf(err, errlen,
			"%s:%u: expected 6 to 8 tab-separated fields (class gpu_rate cpu_rate "
			"share gpu_source cpu_source [mem_gb_per_gpu [ask_cpu_per_gpu]])",
			path, lineno);
		return -EBADMSG;
	}
	if (p->n == GM_PROFILE_MAX) {
		gm_errf(err, errlen, "%s:%u: more than %d classes", path, lineno, GM_PROFILE_MAX);
		return -EBADMSG;
	}
	if (!fld[0][0] || strlen(fld[0]) >= sizeof(c->name) || gm_profile_find(p, fld[0]) >= 0) {
		gm_errf(err, errlen, "%s:%u: class name empty, too long or repeated", path, lineno);
		return -EBADMSG;
	}
	c->gpu_rate = strtod(fld[1], &end[0]);
	c->cpu_rate = strtod(fld[2], &end[1]);
	c->share = strtod(fld[3], &end[2]);
	if (*end[0] || *end[1] || *end[2] || !fld[1][0] || !fld[2][0] || !fld[3][0] ||
	    !(c->gpu_rate >= GM_PROFILE_MIN_RATE && c->gpu_rate <= GM_PROFILE_MAX_RATE) ||
	    !(c->cpu_rate >= GM_PROFILE_MIN_RATE && c->cpu_rate <= GM_PROFILE_MAX_RATE) ||
	    !(c->share >= 0 && c->share <= GM_PROFILE_MAX_RATE)) {
		gm_errf(err, errlen,
			"%s:%u: gpu_rate and cpu_rate must be numbers %g..%g (samples/s) "
			"and share 0..%g",
			path, lineno, GM_PROFILE_MIN_RATE, GM_PROFILE_MAX_RATE,
			GM_PROFILE_MAX_RATE);
		return -EBADMSG;
	}
	c->mem_per_gpu = c->ask_per_gpu = 0;
	if (nf >= 7) {
		char *e;
		c->mem_per_gpu = strtod(fld[6], &e);
		if (*e || !fld[6][0] || !(c->mem_per_gpu >= 0 && c->mem_per_gpu <= 1e9)) {
			gm_errf(err, errlen, "%s:%u: mem_gb_per_gpu must be a number 0..1e9 (GB)",
				path, lineno);
			return -EBADMSG;
		}
	}
	if (nf == 8) {
		char *e;
		c->ask_per_gpu = strtod(fld[7], &e);
		if (*e || !fld[7][0] || !(c->ask_per_gpu >= 0 && c->ask_per_gpu <= 1e6)) {
			gm_errf(err, errlen,
				"%s:%u: ask_cpu_per_gpu must be a number 0..1e6 (vCPUs per GPU)",
				path, lineno);
			return -EBADMSG;
		}
	}
	snprintf(c->name, sizeof(c->name), "%s", fld[0]);
	snprintf(c->gpu_source, sizeof(c->gpu_source), "%s", fld[4]);
	snprintf(c->cpu_source, sizeof(c->cpu_source), "%s", fld[5]);
	p->n++;
	return 0;
}

int gm_profile_load(struct gm_profile *p, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t lcap = 0;
	unsigned lineno = 0;
	double share_sum = 0;
	int rc = 0;

	if (!f) {
		rc = -errno;
		gm_errf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	memset(p, 0, sizeof(*p));
	while (getline(&line, &lcap, f) >= 0) {
		lineno++;
		line[strcspn(line, "\r\n")] = 0;
		if (!line[0] || line[0] == '#')
			continue;
		rc = parse_class(p, line, path, lineno, err, errlen);
		if (rc)
			goto out_close;
		share_sum += p->c[p->n - 1].share;
	}
	if (!p->n || !(share_sum > 0)) {
		gm_errf(err, errlen, "%s:%u: no classes, or all shares are 0", path, lineno);
		rc = -EBADMSG;
	}
out_close:
	free(line);
	fclose(f);
	return rc;
}

int gm_profile_find(const struct gm_profile *p, const char *name)
{
	for (int i = 0; i < p->n; i++)
		if (!strcmp(p->c[i].name, name))
			return i;
	return -1;
}

/* A source text for one TSV field: tabs and line breaks become spaces. */
static void put_field(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc(*s == '\t' || *s == '\n' || *s == '\r' ? ' ' : *s, f);
}

int gm_profile_write(const struct gm_profile *p, const char *path, const char *comment, char *err,
		     size_t errlen)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		int rc = -errno;
		gm_errf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	fputs("# goldminer-profile v1\n", f);
	if (comment && *comment) {
		fputs("# ", f);
		for (const char *c = comment; *c; c++) {
			fputc(*c == '\r' ? ' ' : *c, f);
			if (*c == '\n' && c[1])
				fputs("# ", f);
		}
		if (comment[strlen(comment) - 1] != '\n')
			fputc('\n', f);
	}
	bool mem = false, ask = false; /* the optional columns, where a class has one */
	for (int i = 0; i < p->n; i++) {
		mem |= p->c[i].mem_per_gpu > 0;
		ask |= p->c[i].ask_per_gpu > 0;
	}
	mem |= ask; /* the eighth column needs the seventh */
	fprintf(f, "#class\tgpu_rate\tcpu_rate\tshare\tgpu_source\tcpu_source%s%s\n",
		mem ? "\tmem_gb_per_gpu" : "", ask ? "\task_cpu_per_gpu" : "");
	for (int i = 0; i < p->n; i++) {
		const struct gm_profile_class *c = &p->c[i];
		fprintf(f, "%s\t%.10g\t%.10g\t%.10g\t", c->name, c->gpu_rate, c->cpu_rate,
			c->share);
		put_field(f, c->gpu_source);
		fputc('\t', f);
		put_field(f, c->cpu_source);
		if (mem)
			fprintf(f, "\t%.10g", c->mem_per_gpu);
		if (ask)
			fprintf(f, "\t%.10g", c->ask_per_gpu);
		fputc('\n', f);
	}
	int rc = ferror(f) ? -EIO : 0;
	if (fclose(f) && !rc)
		rc = -errno;
	if (rc)
		gm_errf(err, errlen, "%s: write failed: %s", path, strerror(-rc));
	return rc;
}
