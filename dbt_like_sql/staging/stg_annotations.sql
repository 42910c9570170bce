-- one row per (release, cleaned GAF row): a staged annotation with its evidence class
insert into stg_annotations (
    release_id, protein, term, aspect, evidence, qualifier, is_experimental, annotation_date
)
values (
    :release_id, :protein, :term, :aspect, :evidence, :qualifier, :is_experimental, :annotation_date
)
