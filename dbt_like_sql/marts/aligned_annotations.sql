-- one row per (old_release, new_release, protein, term): experimental knowledge at old_release in new_release's vocabulary
with old_annotations as (
    select
        ea.protein,
        ea.term
    from experimental_annotations as ea
    where ea.release_id = :old_release
),

-- alt ids mapped to their primary; a term the new release no longer holds maps to null
mapped as (
    select distinct
        oa.protein,
        coalesce(lt.term, na.term) as term
    from old_annotations as oa
    left join stg_term_closure as lt
        on lt.release_id = :new_release
        and lt.term = oa.term
        and lt.ancestor = oa.term
    left join stg_term_alt_ids as na
        on na.release_id = :new_release
        and na.alt_id = oa.term
),

-- re-closed in the new ontology, so an edge added between the releases is not mistaken for growth
reclosed as (
    select distinct
        m.protein,
        nc.ancestor as term,
        nc.aspect
    from mapped as m
    inner join stg_term_closure as nc
        on nc.release_id = :new_release
        and nc.term = m.term
),

final as (
    select
        :old_release as old_release,
        :new_release as new_release,
        r.protein,
        r.term,
        r.aspect
    from reclosed as r
)

select * from final
