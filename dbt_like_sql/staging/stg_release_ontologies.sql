-- one row per (release): the content hash of the ontology its stg_term_closure and stg_term_alt_ids rows were built from
insert into stg_release_ontologies (release_id, ontology_sha256)
values (:release_id, :ontology_sha256)
