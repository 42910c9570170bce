-- one row per growth term flagged known on a target that is not partial-knowledge
with growth as (
    select
        ag.protein,
        ag.aspect,
        ag.term,
        ag.mode,
        ag.is_known
    from annotation_growth as ag
    where ag.old_release = :old_release
        and ag.new_release = :new_release
),

final as (
    select
        g.protein,
        g.aspect,
        g.term,
        g.mode
    from growth as g
    where g.is_known
        and g.mode <> 'PK'
)

select * from final
