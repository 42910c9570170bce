-- one row per (release, protein, term): experimental annotation propagated up is_a/part_of within its aspect
with annotations as (
    select distinct
        sa.protein,
        sa.term
    from stg_annotations as sa
    where sa.release_id = :release_id
        and sa.is_experimental = true
),

closure as (
    select
        tc.term,
        tc.ancestor,
        tc.aspect
    from stg_term_closure as tc
    where tc.release_id = :release_id
),

propagated as (
    select distinct
        a.protein,
        c.ancestor as term,
        c.aspect
    from annotations as a
    inner join closure as c
        on c.term = a.term
),

final as (
    select
        :release_id as release_id,
        p.protein,
        p.term,
        p.aspect
    from propagated as p
)

select * from final
