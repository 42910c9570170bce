-- one row per (release, alt_id): the live primary term an alternative GO id resolves to at the release
insert into stg_term_alt_ids (release_id, alt_id, term)
values (:release_id, :alt_id, :term)
