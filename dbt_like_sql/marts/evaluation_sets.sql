-- one row per (window, window_role, protein, aspect, term): a growth frozen as a window's VALID or TEST set
with growth as (
    select
        ag.old_release,
        ag.new_release,
        ag.protein,
        ag.aspect,
        ag.term,
        ag.mode,
        ag.is_ground_truth,
        ag.is_known
    from annotation_growth as ag
    where ag.old_release = :old_release
        and ag.new_release = :new_release
),

final as (
    select
        :window_key as window_key,
        :window_role as window_role,
        g.old_release,
        g.new_release,
        g.protein,
        g.aspect,
        g.term,
        g.mode,
        g.is_ground_truth,
        g.is_known
    from growth as g
)

select * from final
