"""The statements of knowledge's full-text search on PostgreSQL
(``postgres/knowledge.py`` runs them).

Ranking reads each candidate's tsvector (a few KB, compressed), so ranking every
chunk a common word matches grew with the corpus: 300 ms for a query of common
words over 33,000 chunks. The candidates are therefore chosen by the query's
*rare* words (``TEXT_SEARCH``): a word is common when PostgreSQL's statistics of
the column (``pg_stats.most_common_elems``, read every ``STATS_TTL``) put it in
more than ``COMMON`` of the chunks. Chunks with a rare word are all candidates
(up to ``RARE_CAP``); only when they are fewer than the answer's size do chunks
with every common word, then with any, come in, up to ``COMMON_CAP`` each. A
corpus without statistics yet (before autovacuum's first ANALYZE) has no common
words: every match is a candidate, up to ``RARE_CAP``. The statistics are the
table's, all organizations together: a word common in one organization's
documents and rare in the table is rare, and its chunks are candidates up to
``RARE_CAP`` (any of them, unranked, past that).
"""

from __future__ import annotations

__all__ = [
    "COMMON",
    "COMMON_CAP",
    "HIT",
    "RARE_CAP",
    "SCOPE",
    "STATS",
    "STATS_TTL",
    "TEXT_SEARCH",
]

SCOPE = (
    "(d.scope = 'org' OR (d.scope = 'agent' AND d.agent_id = %(agent)s)"
    " OR (d.scope = 'thread' AND d.thread_id = %(thread)s))"
)
HIT = "c.id, c.document_id, d.title, c.ordinal, c.text, c.headings, c.page"
COMMON = 0.05  # a word in more than this share of the chunks is common
RARE_CAP = 5000  # candidates with a rare word (a bound on one search's work)
COMMON_CAP = 1000  # candidates from the common words, each way
STATS_TTL = 300.0  # seconds the common words are kept before they are read again
STATS = (
    "SELECT s.e FROM pg_stats p,"
    " unnest(p.most_common_elems::text::text[], p.most_common_elem_freqs) AS s(e, f)"
    " WHERE p.schemaname = current_schema() AND p.tablename = 'knowledge_chunks'"
    " AND p.attname = 'search' AND s.e IS NOT NULL AND s.f > %s"
)
# The query's lexemes (stemmed as the chunks were; quoted into the tsqueries as
# they are, not parsed again: "or" is a lexeme of several configurations), split
# into rare and common;
# the candidates chosen as the module says, in scope; then their ranking, the
# candidates read again by their row address (ctid: one statement, one snapshot).
IN_SCOPE = (
    " JOIN knowledge_documents d ON d.org_id = c.org_id AND d.id = c.document_id"
    f" WHERE c.org_id = %(org)s AND {SCOPE}"
)
TEXT_SEARCH = f"""
WITH t AS (
  SELECT lexeme, lexeme = ANY(%(common)s::text[]) AS common
  FROM unnest(tsvector_to_array(to_tsvector(%(cfg)s::regconfig, %(q)s))) AS lexeme
), m AS (
  SELECT
    (string_agg(quote_literal(lexeme), ' | ') FILTER (WHERE NOT common))::tsquery AS rare,
    (string_agg(quote_literal(lexeme), ' & ') FILTER (WHERE common))::tsquery AS every,
    (string_agg(quote_literal(lexeme), ' | ') FILTER (WHERE common))::tsquery AS loose,
    string_agg(quote_literal(lexeme), ' | ')::tsquery AS anyq
  FROM t
), r AS MATERIALIZED (
  SELECT c.ctid AS tid FROM knowledge_chunks c{IN_SCOPE}
  AND c.search @@ (SELECT rare FROM m) LIMIT {RARE_CAP}
), e AS MATERIALIZED (
  SELECT c.ctid AS tid FROM knowledge_chunks c{IN_SCOPE}
  AND (SELECT count(*) FROM r) < %(limit)s
  AND c.search @@ (SELECT every FROM m) AND c.ctid NOT IN (SELECT tid FROM r)
  LIMIT {COMMON_CAP}
), o AS (
  SELECT c.ctid AS tid FROM knowledge_chunks c{IN_SCOPE}
  AND (SELECT count(*) FROM r) + (SELECT count(*) FROM e) < %(limit)s
  AND c.search @@ (SELECT loose FROM m)
  AND c.ctid NOT IN (SELECT tid FROM r) AND c.ctid NOT IN (SELECT tid FROM e)
  LIMIT {COMMON_CAP}
)
SELECT {HIT}, ts_rank_cd(c.search, (SELECT anyq FROM m)) AS score
FROM knowledge_chunks c
JOIN knowledge_documents d ON d.org_id = c.org_id AND d.id = c.document_id
WHERE c.ctid = ANY(ARRAY(SELECT tid FROM r UNION ALL SELECT tid FROM e
                         UNION ALL SELECT tid FROM o))
ORDER BY score DESC, c.document_id, c.ordinal LIMIT %(limit)s
"""
