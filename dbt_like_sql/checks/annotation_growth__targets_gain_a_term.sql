-- one row per growth target with no ground-truth term beyond its known ones (nothing grew)
with growth as (
    select
        ag.protein,
        ag.aspect,
        ag.mode,
        case when ag.is_ground_truth and not ag.is_known then 1 else 0 end as is_gained
    from annotation_growth as ag
    where ag.old_release = :old_release
        and ag.new_release = :new_release
),

final as (
    select
        g.protein,
        g.aspect,
        g.mode,
        sum(g.is_gained) as n_gained
    from growth as g
    group by g.protein, g.aspect, g.mode
    having sum(g.is_gained) = 0
)

select * from final
