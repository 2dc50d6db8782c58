"""The dataset card (README.md with a Hugging Face YAML header), the LICENSE notice and
the study.json manifest of an export."""

from __future__ import annotations

import math
import re
from typing import Any

from annotate.models import Study
from annotate.rubrics import NA
from datasets.exporting.folder import FORMAT_VERSION, LEGAL_CODE_URL, LICENCE_URL, TABLES
from datasets.exporting.licences import licence_allows_text

# --- the card, the licence, the manifest --------------------------------------------------------

_SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))


def _size_category(n: int) -> str:
    for limit, name in _SIZE_CATEGORIES:
        if n < limit:
            return name
    return "1M<n<10M" if n < 10_000_000 else "n>10M"


def build_manifest(study: Study, context: dict, include_restricted: bool) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "study": {
            "slug": study.slug,
            "uuid": str(study.uuid),
            "title": study.title,
            "description": study.description,
            "guidelines": study.guidelines,
            "licence": study.licence,
            "assisted": study.assisted,
            "rubric_key": study.rubric.key,
            "rubric_version": study.rubric.version,
        },
        "phase": context["phase"],
        "include_calibration": context["include_calibration"],
        "include_restricted": include_restricted,
        "formats": list(context["formats"]),
        "tables": context["counts"],
        "withheld_sources": context["withheld"],
    }


def _fmt(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.4f}"


def dataset_card(study: Study, context: dict, include_restricted: bool) -> str:
    """README.md of the dataset folder: a Hugging Face card (YAML front matter), how the
    data was made, the files, the rubric, the agreement figures, licence, attribution and
    citation."""
    restricted_inside = include_restricted and any(not licence_allows_text(s[3]) for s in context["sources"])
    lines = [
        *_card_title(study, context, restricted_inside),
        *_card_how_made(study, context),
        *_card_files(context),
        *_card_protocol(context.get("protocol")),
        *_card_rubric(context["definition"]),
        *_card_agreement(context["agreement"]),
        *_card_licence(context, restricted_inside),
        *_card_attribution(study, context),
    ]
    return "\n".join(lines)


def _card_title(study: Study, context: dict, restricted_inside: bool) -> list[str]:
    """The YAML front matter, the title and what the dataset holds."""
    import yaml

    counts = context["counts"]
    # The hub's loader reads a file through Arrow, one type per column: Parquet, else CSV
    # (nested values as JSON text in both); JSON Lines only when it is all there is (its
    # nested values are JSON values, and `ratings.value` mixes numbers, strings and lists).
    data_format = next(f for f in ("parquet", "csv", "jsonl") if f in context["formats"])
    header: dict[str, Any] = {"license": "other" if restricted_inside else "cc-by-4.0"}
    if restricted_inside:
        header["license_name"] = "cc-by-4.0-with-restricted-sources"
        header["license_link"] = "LICENSE"
    header.update(
        {
            "language": ["en"],
            "pretty_name": study.title,
            "task_categories": ["summarization", "text-classification"],
            "tags": ["human-evaluation", "summarization-evaluation", "factuality", "inter-annotator-agreement"],
            "size_categories": [_size_category(counts["ratings"])],
            "configs": [
                {"config_name": name, "data_files": [{"split": "train", "path": f"{data_format}/{name}.{data_format}"}]}
                for name in TABLES
                if counts[name]
            ],
        }
    )
    front = yaml.safe_dump(header, sort_keys=False, allow_unicode=True, width=1000)
    return [
        "---",
        front.rstrip("\n"),
        "---",
        "",
        f"# {study.title}",
        "",
        f"Human ratings of LLM-written summaries from the study `{study.slug}`: "
        f"{counts['summaries']} summaries of {counts['sources']} sources, "
        + (f"{counts['comparisons']} comparisons of two summaries or more, " if counts.get("comparisons") else "")
        + f"{counts['ratings']} answers and {counts['spans']} highlighted spans by "
        f"{context['raters_answered']} raters, with their rationales, under the rubric "
        f"`{study.rubric.key}` (version {study.rubric.version}).",
        "",
    ]


def _card_how_made(study: Study, context: dict) -> list[str]:
    phase_text = {
        "all": "both phases (initial and after discussion)",
        "initial": "the initial phase only",
        "post_discussion": "the post-discussion phase only",
    }[context["phase"]]
    lines = [
        "## How the data was made",
        "",
    ]
    if study.description:
        lines += [study.description.strip(), ""]
    lines += [
        "Raters read each summary beside the context it was written from and answered the "
        "rubric below in a web application; every answer is kept with its revision history, "
        "and this export holds the answers that count: for each assignment and phase, the "
        f"newest submitted revision. It covers {phase_text}; calibration (pilot) batches are "
        + ("included." if context["include_calibration"] else "left out."),
        "",
    ]
    if study.guidelines:
        lines += ["Guidelines shown to the raters:", "", *[f"> {g}" for g in study.guidelines.strip().splitlines()], ""]
    lines += [
        "Raters appear only as pseudonyms (`rater-01`, ...), numbered by their first submitted "
        "answer; no names, usernames or e-mail addresses are included. Free-text answers and "
        "rationales are exported as the raters wrote them.",
        "",
    ]
    return lines


TABLE_DESCRIPTIONS = {
    "sources": "the contexts, with licence and attribution (text withheld where the licence forbids)",
    "findings": "results of each source that per-finding questions ask about",
    "summaries": "the rated summaries, with generator and pipeline metadata",
    "claims": "statements of the summaries with their verification verdicts",
    "batches": "the rating designs",
    "ratings": "one row per answer (per finding for per-finding questions)",
    "spans": "one row per highlighted span, with offsets, sub-answers and rationale",
    "raters": "pseudonyms, roles and counts",
    "rubric": "each rubric version that was answered, as a JSON definition",
    "consensus": "adjudicated answers (the latest decision per item and question)",
    "comparisons": "pairwise comparison items: one source, the summaries compared (their keys, in order)",
    "comparison_answers": (
        "one row per answer to a comparison question: the summaries on the left and right as the rater "
        "saw them, the preferred one (or tie) and its side, strength, rationale, and highlights in either "
        "summary (each naming its summary)"
    ),
    "qualification_attempts": (
        "each scored qualification attempt of a rater (by pseudonym): agreement with gold, pass or fail, "
        "the pass rule and its version, and the retries the study admin allowed"
    ),
    "exclusions": (
        "raters whose answers in a batch a study admin excluded from the analysis (left out of the answer "
        "tables above), with the reason, who decided and when"
    ),
    "flags": "raters' questions to the study admins about items (guidelines, broken sources), with the answers",
    "settings_changes": (
        "every change of a study setting (title, guidelines, licence, description, the too-fast floor) "
        "after the study was made: before, after, who (pseudonym), how (settings page or import) and when"
    ),
    "onboarding": (
        "per rater (pseudonym): consent decisions (version, accepted, time), instructions opened and "
        "acknowledged, background questionnaire answers, and for panel participants the panel and outcome"
    ),
}


def _card_files(context: dict) -> list[str]:
    counts = context["counts"]
    lines = [
        "## Files",
        "",
        "| table | rows | what |",
        "|---|---|---|",
    ]
    for name in TABLES:
        lines.append(f"| `{name}` | {counts[name]} | {TABLE_DESCRIPTIONS[name]} |")
    formats = ", ".join(f"`{f}/`" for f in context["formats"])
    lines += [
        "",
        f"Every table is in {formats}. Nested values (metadata, answers, definitions) are "
        "JSON values in the JSON Lines files and JSON text in the CSV and Parquet files (one "
        "type per column, as `load_dataset` needs). `study.json` describes the export; "
        "`SHA256SUMS` lists a checksum of every file (`sha256sum -c SHA256SUMS`). The format "
        "is documented in the platform's `docs/export-format.md`.",
        "",
    ]
    if "csv" in context["formats"]:
        lines += [
            "**CSV and spreadsheets.** In the `csv/` files, a text cell that starts with `=`, `+`, "
            "`-`, `@`, a tab, a carriage return or `'` has a `'` put in front of it, so that a "
            'spreadsheet shows it as text instead of running it as a formula ("CSV injection"). '
            "Remove one leading `'` from a text cell to get the exact text back. Numbers, booleans "
            "and the JSON text columns are written unchanged, and the JSON Lines and Parquet files "
            "hold every text exactly as written.",
            "",
        ]
    return lines


def _card_protocol(protocol: dict | None) -> list[str]:
    """The analysis plan frozen before rating, when the study has one (protocol.json)."""
    if not protocol:
        return []
    plan = protocol["document"]["plan"]
    return [
        "## Pre-registered analysis plan",
        "",
        f"The analysis plan was frozen on {protocol['frozen_at'][:10]} (protocol v{protocol['version']}, "
        f"SHA-256 `{protocol['sha256']}`): {plan['kind'].replace('_', ' ')} study, primary test "
        f"{plan['test'].replace('_', ' ')} with {plan['correction']} correction at α = {plan['alpha']}, "
        f"{plan['planned_n']} items planned. `protocol.json` holds every version's document; its "
        "SHA-256 is that of the document as canonical JSON (keys sorted, no spaces, UTF-8).",
        "",
    ]


def _card_rubric(definition) -> list[str]:
    lines = [
        "## The rubric",
        "",
    ]
    for q in definition.questions:
        lines.append(f"- **`{q.key}`** ({q.kind}{', required' if q.required else ''}): {q.prompt}")
        if q.options:
            lines.append("  " + "; ".join(f"{o.value} = {o.label}" for o in q.options))
        if q.na:
            lines.append(f"  N/A allowed (stored as `{NA}`)")
        for sq in q.span_questions:
            values = f" ({', '.join(str(v) for v in sq.values)})" if sq.values else ""
            lines.append(f"  - span question `{sq.key}`: {sq.prompt}{values}")
    return lines


def _card_agreement(agreement: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## Agreement", ""]
    if not agreement:
        lines += ["The rubric has no scale questions, so no agreement is reported.", ""]
    else:
        lines += [
            "Per scale question, over each rater's answer per summary (after discussion where there "
            "was one; a rater who rated a summary in several batches counts once, with the newest "
            "submitted answer); each finding of a per-finding question is an item; N/A is a missing "
            "rating unless the rubric counts it as a category. Calibration (pilot) batches are left "
            "out. The numbers are the platform's analysis report for the same answers (Fleiss and "
            "Randolph on the items with the modal number of ratings; Krippendorff's alpha at the "
            "ordinal level).",
            "",
            "| question | items rated by ≥ 2 raters | all items rated | raters | % agreement | Fleiss κ | Randolph κ "
            "| Gwet AC1 | PABAK | α ordinal |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for entry in agreement:
            r = entry["report"]
            if r is None:
                lines.append(f"| `{entry['question']}` | – | – | – | {entry['error']} | | | | | |")
                continue
            lines.append(
                f"| `{entry['question']}` | {r.n_items_shared} | {r.n_items} | {r.n_raters} | "
                f"{_fmt(r.percent_agreement)} | "
                f"{_fmt(r.fleiss_kappa.value)} | {_fmt(r.randolph_kappa.value)} | {_fmt(r.gwet_ac1)} | "
                f"{_fmt(r.pabak)} | {_fmt(r.krippendorff_alpha.ordinal)} |"
            )
        lines.append("")
    return lines


def _card_licence(context: dict, restricted_inside: bool) -> list[str]:
    withheld = context["withheld"]
    lines = ["## Licence", ""]
    if restricted_inside:
        lines += [
            "This export was made with `--include-restricted`: it contains the text of sources whose "
            "licence is not CC BY, CC0 or public domain (marked below). It must not be published as a "
            "CC BY 4.0 dataset. The ratings, rationales, spans and summaries are under CC BY 4.0.",
            "",
        ]
    else:
        lines += [
            f"The ratings, rationales, spans, summaries, claims and rubric are released under CC BY 4.0 "
            f"({LICENCE_URL}); see `LICENSE`. Source texts keep their own licences (CC BY, CC0 or public "
            "domain), listed below with the attribution each requires.",
            "",
        ]
    if withheld:
        lines += [
            f"**Withheld sources ({len(withheld)}).** Their licence does not allow redistribution under "
            "CC BY 4.0 (or none is recorded), so only their identifiers, title, attribution and licence "
            "are included; their text, sentences, findings' wording, quoted source spans and the "
            "`explanation` of claims about summaries of them (a checker's critique, which may quote the "
            "source) are empty:",
            "",
            *[f"- `{key}`" for key in withheld],
            "",
        ]
    if context["flagged_summaries"]:
        lines += [
            "Summaries written from a withheld source are included (they are the study's own output "
            "and what was rated) and flagged `source_withheld`: "
            + ", ".join(f"`{k}`" for k in context["flagged_summaries"])
            + ".",
            "",
        ]
    return lines


def _card_attribution(study: Study, context: dict) -> list[str]:
    """Each source's attribution and licence, and a BibTeX entry for the dataset."""
    lines = ["## Attribution", ""]
    for key, title, attribution, licence, url, allowed in context["sources"]:
        mark = "" if allowed else " — *text withheld*"
        credit = attribution or title or "(no attribution recorded)"
        licence_text = f"[{licence}]({url})" if licence and url else licence or "no licence recorded"
        lines.append(f"- `{key}`: {credit} Licence: {licence_text}.{mark}")
    year = context["newest"].year if context["newest"] else None
    lines += [
        "",
        "## Citation",
        "",
        "```bibtex",
        f"@misc{{{re.sub(r'[^A-Za-z0-9]', '_', study.slug)},",
        f"  title = {{{study.title}}},",
        "  howpublished = {Dataset of human ratings of LLM-written summaries},",
        *([f"  year = {{{year}}},"] if year else []),
        "  note = {Released under CC BY 4.0}",
        "}",
        "```",
        "",
        "Please also cite the source articles listed under Attribution.",
        "",
    ]
    return lines


def cite_doi(card: str, *, doi: str, version: str) -> str:
    """The card of a release with its DOI (a Zenodo deposit's): the BibTeX entry of the
    Citation section gets `doi`, `url` and `version`, and a line says how to cite this
    release. A card without that section gets one."""
    url = f"https://doi.org/{doi}"
    fields = [f"  doi = {{{doi}}},", f"  url = {{{url}}},", f"  version = {{{version}}},"]
    line = f"Cite this release (version {version}) as [doi:{doi}]({url})."
    lines = card.split("\n")
    try:
        at = lines.index("## Citation")
        entry = next(i for i in range(at, len(lines)) if lines[i].startswith("@misc{"))
        end = next(i for i in range(entry, len(lines)) if lines[i] == "```")
    except (ValueError, StopIteration):
        return card.rstrip("\n") + "\n\n## Citation\n\n" + line + "\n"
    return "\n".join([*lines[: entry + 1], *fields, *lines[entry + 1 : end + 1], "", line, *lines[end + 1 :]])


def licence_notice(withheld: list[str], include_restricted: bool) -> str:
    text = (
        "Creative Commons Attribution 4.0 International (CC BY 4.0)\n"
        "\n"
        "The ratings, rationales, highlighted spans, consensus answers, summaries, claims and\n"
        "rubric in this folder are licensed under the Creative Commons Attribution 4.0\n"
        f"International licence: {LICENCE_URL}\n"
        f"Full legal code: {LEGAL_CODE_URL}\n"
        "\n"
        "You are free to share (copy and redistribute the material in any medium or format)\n"
        "and adapt (remix, transform and build upon the material) for any purpose, even\n"
        "commercially, under the following term: Attribution. You must give appropriate\n"
        "credit, provide a link to the licence, and indicate if changes were made. You may\n"
        "not apply legal terms or technological measures that legally restrict others from\n"
        "doing anything the licence permits. The legal code linked above is the licence;\n"
        "this notice is a summary of it.\n"
        "\n"
        "Source texts are not covered by this notice: each keeps its own licence (CC BY,\n"
        "CC0 or public domain), listed with its attribution in README.md.\n"
    )
    if include_restricted:
        text += (
            "\nThis folder was exported with --include-restricted and contains source texts\n"
            "under other licences (see README.md). Do not redistribute it as CC BY 4.0.\n"
        )
    elif withheld:
        text += f"\nThe text of {len(withheld)} source(s) under other licences was withheld (see README.md).\n"
    return text
