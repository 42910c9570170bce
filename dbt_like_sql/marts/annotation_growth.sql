-- one row per (old_release, new_release, protein, aspect, term): a growth target's ground-truth or known term
with gained as (
    select distinct
        nt.protein,
        nt.aspect
    from experimental_annotations as nt
    inner join stg_sequences as os
        on os.release_id = :old_release
        and os.protein = nt.protein
    left join stg_sequences as ns
        on ns.release_id = :new_release
        and ns.protein = nt.protein
    left join aligned_annotations as ot
        on ot.old_release = :old_release
        and ot.new_release = :new_release
        and ot.protein = nt.protein
        and ot.term = nt.term
    where nt.release_id = :new_release
        and ot.term is null
        -- unchanged sequence where the new release knows it
        and (ns.protein is null or ns.sequence_sha256 = os.sequence_sha256)
),

targets as (
    select
        g.protein,
        g.aspect,
        case
            when exists (
                select 1
                from aligned_annotations as oa
                where oa.old_release = :old_release
                    and oa.new_release = :new_release
                    and oa.protein = g.protein
                    and oa.aspect = g.aspect
            ) then 'PK'
            when exists (
                select 1
                from aligned_annotations as op
                where op.old_release = :old_release
                    and op.new_release = :new_release
                    and op.protein = g.protein
            ) then 'LK'
            else 'NK'
        end as mode
    from gained as g
),

ground_truth_rows as (
    select
        t.protein,
        t.aspect,
        nt.term,
        t.mode,
        true as is_ground_truth,
        case when t.mode = 'PK' and ot.term is not null then true else false end as is_known
    from targets as t
    inner join experimental_annotations as nt
        on nt.release_id = :new_release
        and nt.protein = t.protein
        and nt.aspect = t.aspect
    left join aligned_annotations as ot
        on ot.old_release = :old_release
        and ot.new_release = :new_release
        and ot.protein = t.protein
        and ot.term = nt.term
),

-- known terms that the new release no longer holds still mask predictions at scoring time
known_only_rows as (
    select
        t.protein,
        t.aspect,
        ot.term,
        t.mode,
        false as is_ground_truth,
        true as is_known
    from targets as t
    inner join aligned_annotations as ot
        on ot.old_release = :old_release
        and ot.new_release = :new_release
        and ot.protein = t.protein
        and ot.aspect = t.aspect
    left join experimental_annotations as nt
        on nt.release_id = :new_release
        and nt.protein = t.protein
        and nt.term = ot.term
    where t.mode = 'PK'
        and nt.term is null
),

growth_rows as (
    select * from ground_truth_rows as gtr
    union all
    select * from known_only_rows as kor
),

final as (
    select
        :old_release as old_release,
        :new_release as new_release,
        gr.protein,
        gr.aspect,
        gr.term,
        gr.mode,
        gr.is_ground_truth,
        gr.is_known
    from growth_rows as gr
)

select * from final
