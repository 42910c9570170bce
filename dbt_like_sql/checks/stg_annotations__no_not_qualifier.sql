-- one row per staged annotation of the release carrying a NOT qualifier (they must be dropped upstream)
with staged as (
    select
        sa.release_id,
        sa.protein,
        sa.term,
        sa.evidence,
        sa.qualifier
    from stg_annotations as sa
    where sa.release_id = :release_id
        and sa.qualifier is not null
),

final as (
    select
        s.release_id,
        s.protein,
        s.term,
        s.evidence,
        s.qualifier
    from staged as s
    where s.qualifier = 'NOT'
        or s.qualifier like 'NOT|%'
        or s.qualifier like '%|NOT'
        or s.qualifier like '%|NOT|%'
)

select * from final
