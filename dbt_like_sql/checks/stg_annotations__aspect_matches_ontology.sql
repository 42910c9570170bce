-- one row per (term, GAF aspect) of the release whose aspect differs from the ontology's namespace
with staged_aspects as (
    select distinct
        sa.term,
        sa.aspect
    from stg_annotations as sa
    where sa.release_id = :release_id
),

term_aspects as (
    select
        tc.term,
        tc.aspect
    from stg_term_closure as tc
    where tc.release_id = :release_id
        and tc.ancestor = tc.term
),

final as (
    select
        :release_id as release_id,
        sa.term,
        sa.aspect as gaf_aspect,
        ta.aspect as ontology_aspect
    from staged_aspects as sa
    inner join term_aspects as ta
        on ta.term = sa.term
    where ta.aspect <> sa.aspect
)

select * from final
