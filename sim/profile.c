/*
 * profile.c - the profile table (profile.h): a built-in copy of
 * traces/profile.tsv and a reader for tables in that format.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goldminer/profile.h"
#include "goldminer/util.h"

static const struct gm_profile_class builtin[] = {
    {"resnet50", 1200, 150, 0.25,
     "NVIDIA DeepLearningExamples, PyTorch ResNet50 v1.5 README, 'Training performance: NVIDIA "
     "DGX-1 16GB (8x V100 16GB)', 1 GPU mixed precision: 1200 img/s (pytorch-21.03 NGC container; "
     "checked against the README text)",
     "ImageNet JPEG decode + RandomResizedCrop + flip, one core: order of 100-200 images/s (Mohan "
     "et al., \"Analyzing and mitigating data stalls in DNN training\", VLDB'21; derived); "
     "cross-check, measured by this project's make bench: torchvision ImageFolder + DataLoader, 2 "
     "workers on 2 vCPUs, 500x375 q90 photos, normalised float32 output: 185-228 images/s per "
     "vCPU => ~8 vCPU/GPU"},
    {"cv-light", 3000, 150, 0.15,
     "ResNet-18/AlexNet/ShuffleNet-class vision models: several k images/s per V100 (Mohan et al. "
     "VLDB'21 single out these models as needing the most CPU per GPU; approx.)",
     "same per-core ImageNet pipeline as resnet50 (derived) => ~20 vCPU/GPU"},
    {"vit", 300, 100, 0.10,
     "ViT-B/16 at 224 px, mixed precision: ~300 images/s per V100 (derived from A100 figures at "
     "~3x)",
     "heavier augmentation (RandAugment, mixup) at ~100 images/s per vCPU (assumption) => ~3 "
     "vCPU/GPU"},
    {"nlp", 400, 4000, 0.20,
     "BERT-class fine-tuning, sequence 128, V100 mixed precision: a few hundred sequences/s per "
     "GPU (NVIDIA DeepLearningExamples BERT tables; approx.)",
     "pre-tokenised input needs only batching/collation: thousands of sequences/s per vCPU "
     "(assumption) => ~0.1 vCPU/GPU"},
    {"speech", 200, 25, 0.10, "ASR (Jasper/QuartzNet-class): ~200 utterances/s per GPU (approx.)",
     "on-the-fly spectrogram + SpecAugment: ~25 utterances/s per vCPU (assumption) => ~8 vCPU/GPU"},
    {"recsys", 100000, 8000, 0.20,
     "CTR/recommendation (DLRM/DeepFM-class): ~1e5 samples/s per GPU (approx.)",
     "feature parsing and hashing ~8k samples/s per vCPU; the GoldMiner paper (SIGMOD'23) reports "
     "such PAI jobs as pre-processing bound (derived) => ~12.5 vCPU/GPU"},
};

void gm_profile_default(struct gm_profile *p)
{
	memset(p, 0, sizeof(*p));
	p->n = (int)(sizeof(builtin) / sizeof(builtin[0]));
	memcpy(p->c, builtin, sizeof(builtin));
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
		char *fld[6], *s = line, *end[3];
		int nf = 0;
		lineno++;
		line[strcspn(line, "\r\n")] = 0;
		if (!line[0] || line[0] == '#')
			continue;
		for (;;) { /* exactly six fields; nf = 7 flags a seventh */
			if (nf == 6) {
				nf = 7;
				break;
			}
			fld[nf++] = s;
			char *t = strchr(s, '\t');
			if (!t)
				break;
			*t = 0;
			s = t + 1;
		}
		struct gm_profile_class *c = &p->c[p->n];
		if (nf != 6) {
			gm_errf(err, errlen,
				"%s:%u: expected 6 tab-separated fields "
				"(class gpu_rate cpu_rate share gpu_source cpu_source)",
				path, lineno);
			goto bad;
		}
		if (p->n == GM_PROFILE_MAX) {
			gm_errf(err, errlen, "%s:%u: more than %d classes", path, lineno,
				GM_PROFILE_MAX);
			goto bad;
		}
		if (!fld[0][0] || strlen(fld[0]) >= sizeof(c->name) ||
		    gm_profile_find(p, fld[0]) >= 0) {
			gm_errf(err, errlen, "%s:%u: class name empty, too long or repeated", path,
				lineno);
			goto bad;
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
			goto bad;
		}
		snprintf(c->name, sizeof(c->name), "%s", fld[0]);
		snprintf(c->gpu_source, sizeof(c->gpu_source), "%s", fld[4]);
		snprintf(c->cpu_source, sizeof(c->cpu_source), "%s", fld[5]);
		share_sum += c->share;
		p->n++;
	}
	if (!p->n || !(share_sum > 0)) {
		gm_errf(err, errlen, "%s:%u: no classes, or all shares are 0", path, lineno);
		goto bad;
	}
	goto out_close;
bad:
	rc = -EBADMSG;
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
	fputs("#class\tgpu_rate\tcpu_rate\tshare\tgpu_source\tcpu_source\n", f);
	for (int i = 0; i < p->n; i++) {
		const struct gm_profile_class *c = &p->c[i];
		fprintf(f, "%s\t%.10g\t%.10g\t%.10g\t", c->name, c->gpu_rate, c->cpu_rate,
			c->share);
		put_field(f, c->gpu_source);
		fputc('\t', f);
		put_field(f, c->cpu_source);
		fputc('\n', f);
	}
	int rc = ferror(f) ? -EIO : 0;
	if (fclose(f) && !rc)
		rc = -errno;
	if (rc)
		gm_errf(err, errlen, "%s: write failed: %s", path, strerror(-rc));
	return rc;
}
