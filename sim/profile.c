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
    {"resnet50", 1200, 150, 0.25,
     "checked: NVIDIA DeepLearningExamples, "
     "PyTorch/Classification/ConvNets/resnet50v1.5/README.md, table 'Training performance: "
     "NVIDIA DGX-1 16GB (8x V100 16GB)', 1 GPU, Throughput - mixed precision: 1200 img/s "
     "(pytorch-21.03 NGC container)",
     "assumption: ImageNet JPEG decode + RandomResizedCrop + flip in PyTorch/PIL, one core: "
     "order of 100-200 images/s (after Mohan et al., 'Analyzing and Mitigating Data Stalls in "
     "DNN Training', PVLDB 14(5) 2021; not checked: only its abstract could be read). "
     "Cross-check by this project's tests/bench/bench-python.sh (torchvision ImageFolder + "
     "DataLoader, 500x375 q90 photos, float32 output): 185-228 images/s per vCPU => ~8 "
     "vCPU/GPU",
     0},
    {"cv-light", 3000, 150, 0.15,
     "assumption: ResNet-18/AlexNet/ShuffleNet-class vision models, several k images/s per "
     "V100 (no source checked)",
     "assumption: the same per-core PyTorch ImageNet pipeline as resnet50 => ~20 vCPU/GPU", 0},
    {"vit", 300, 100, 0.10,
     "assumption: ViT-B/16 at 224 px, mixed precision, ~300 images/s per V100 (from A100 "
     "figures at ~3x; no source named or checked)",
     "assumption: heavier augmentation (RandAugment, mixup), ~100 images/s per vCPU => ~3 "
     "vCPU/GPU",
     0},
    {"nlp", 164, 4000, 0.20,
     "checked: NVIDIA DeepLearningExamples, PyTorch/LanguageModeling/BERT/README.md, table "
     "'Pre-training NVIDIA DGX-1 With 16G' (pytorch:20.06-py3), 1 GPU, sequence length 128, "
     "Throughput - mixed precision: 164 sequences/s (the row said 400, which no table there "
     "shows; its SQuAD fine-tuning table, sequence length 384, shows 50 per V100 16G)",
     "assumption: pre-tokenised input needs only batching/collation, thousands of sequences/s "
     "per vCPU => ~0.04 vCPU/GPU",
     0},
    {"speech", 200, 25, 0.10,
     "assumption: ASR (QuartzNet-class), ~200 utterances/s per GPU (not checked). A larger ASR "
     "model is far slower: NVIDIA DeepLearningExamples "
     "PyTorch/SpeechRecognition/Jasper/README.md, 'Training performance: NVIDIA DGX-1 (8x V100 "
     "16G)', 1 GPU, batch 16, mixed precision: 29.63 sequences/s (checked)",
     "assumption: on-the-fly spectrogram + SpecAugment, ~25 utterances/s per vCPU => ~8 "
     "vCPU/GPU",
     0},
    {"recsys", 100000, 8000, 0.20,
     "assumption: CTR/recommendation (DeepFM-class), ~1e5 samples/s per GPU (not checked). "
     "NVIDIA's DLRM is far faster: DeepLearningExamples PyTorch/Recommendation/DLRM/README.md, "
     "'Training performance: NVIDIA DGX-1 (8x V100 32G)', 1 GPU, batch 32k, mixed precision: "
     "875k samples/s (checked)",
     "assumption: feature parsing and hashing, ~8k samples/s per vCPU (the GoldMiner paper, "
     "SIGMOD'23, reports such PAI jobs as pre-processing bound; not checked) => ~12.5 vCPU/GPU",
     0},
};

void gm_profile_default(struct gm_profile *p)
{
	memset(p, 0, sizeof(*p));
	p->n = (int)(sizeof(builtin) / sizeof(builtin[0]));
	memcpy(p->c, builtin, sizeof(builtin));
}

/* Split line at its tabs into fld: the number of fields, 8 when there are more
 * than seven. */
static int split_fields(char *line, char *fld[7])
{
	char *s = line;
	int nf = 0;

	for (;;) { /* six or seven fields; nf = 8 flags an eighth */
		if (nf == 7) {
			nf = 8;
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
	char *fld[7], *end[3];
	int nf = split_fields(line, fld);
	struct gm_profile_class *c = &p->c[p->n];

	if (nf != 6 && nf != 7) {
		gm_errf(err, errlen,
			"%s:%u: expected 6 or 7 tab-separated fields "
			"(class gpu_rate cpu_rate share gpu_source cpu_source [mem_gb_per_gpu])",
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
	c->mem_per_gpu = 0;
	if (nf == 7) {
		char *e;
		c->mem_per_gpu = strtod(fld[6], &e);
		if (*e || !fld[6][0] || !(c->mem_per_gpu >= 0 && c->mem_per_gpu <= 1e9)) {
			gm_errf(err, errlen, "%s:%u: mem_gb_per_gpu must be a number 0..1e9 (GB)",
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
	bool mem = false; /* the optional column, where a class has a memory demand */
	for (int i = 0; i < p->n; i++)
		mem |= p->c[i].mem_per_gpu > 0;
	fputs(mem ? "#class\tgpu_rate\tcpu_rate\tshare\tgpu_source\tcpu_source\tmem_gb_per_gpu\n"
		  : "#class\tgpu_rate\tcpu_rate\tshare\tgpu_source\tcpu_source\n",
	      f);
	for (int i = 0; i < p->n; i++) {
		const struct gm_profile_class *c = &p->c[i];
		fprintf(f, "%s\t%.10g\t%.10g\t%.10g\t", c->name, c->gpu_rate, c->cpu_rate,
			c->share);
		put_field(f, c->gpu_source);
		fputc('\t', f);
		put_field(f, c->cpu_source);
		if (mem)
			fprintf(f, "\t%.10g", c->mem_per_gpu);
		fputc('\n', f);
	}
	int rc = ferror(f) ? -EIO : 0;
	if (fclose(f) && !rc)
		rc = -errno;
	if (rc)
		gm_errf(err, errlen, "%s: write failed: %s", path, strerror(-rc));
	return rc;
}
