-- one row per growth target without a sequence at the old release, or whose sequence changed at the new one
with targets as (
    select distinct
        ag.protein,
        ag.aspect,
        ag.mode
    from annotation_growth as ag
    where ag.old_release = :old_release
        and ag.new_release = :new_release
),

old_sequences as (
    select
        ss.protein,
        ss.sequence_sha256
    from stg_sequences as ss
    where ss.release_id = :old_release
),

new_sequences as (
    select
        ss.protein,
        ss.sequence_sha256
    from stg_sequences as ss
    where ss.release_id = :new_release
),

final as (
    select
        t.protein,
        t.aspect,
        t.mode,
        os.sequence_sha256 as old_sequence_sha256,
        ns.sequence_sha256 as new_sequence_sha256
    from targets as t
    left join old_sequences as os
        on os.protein = t.protein
    left join new_sequences as ns
        on ns.protein = t.protein
    where os.protein is null
        or ns.sequence_sha256 <> os.sequence_sha256
)

select * from final
