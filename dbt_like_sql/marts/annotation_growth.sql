-- one row per (old_release, new_release, protein, aspect, term): a growth target's ground-truth or known term
with old_annotations as (
    select
        ea.protein,
        ea.term
    from experimental_annotations as ea
    where ea.release_id = :old_release
),

new_closure as (
    select
        tc.term,
        tc.ancestor,
        tc.aspect
    from stg_term_closure as tc
    where tc.release_id = :new_release
),

new_live_terms as (
    select nc.term
    from new_closure as nc
    where nc.ancestor = nc.term
),

new_alt_ids as (
    select
        ta.alt_id,
        ta.term
    from stg_term_alt_ids as ta
    where ta.release_id = :new_release
),

-- old knowledge in the new release's vocabulary: alt ids mapped, obsolete terms dropped, and
-- re-closed, so an edge added between the releases is not mistaken for growth
old_in_new_vocabulary as (
    select distinct
        oa.protein,
        coalesce(lt.term, na.term) as term
    from old_annotations as oa
    left join new_live_terms as lt
        on lt.term = oa.term
    left join new_alt_ids as na
        on na.alt_id = oa.term
),

old_terms as (
    select distinct
        ov.protein,
        nc.aspect,
        nc.ancestor as term
    from old_in_new_vocabulary as ov
    inner join new_closure as nc
        on nc.term = ov.term
),

new_terms as (
    select
        ea.protein,
        ea.aspect,
        ea.term
    from experimental_annotations as ea
    where ea.release_id = :new_release
),

old_proteins as (
    select distinct ot.protein
    from old_terms as ot
),

old_aspects as (
    select distinct
        ot.protein,
        ot.aspect
    from old_terms as ot
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

-- a sequence known at old, and not replaced by a different one where the new release knows it
eligible_proteins as (
    select os.protein
    from old_sequences as os
    left join new_sequences as ns
        on ns.protein = os.protein
    where ns.protein is null
        or ns.sequence_sha256 = os.sequence_sha256
),

gained_aspects as (
    select distinct
        nt.protein,
        nt.aspect
    from new_terms as nt
    left join old_terms as ot
        on ot.protein = nt.protein
        and ot.aspect = nt.aspect
        and ot.term = nt.term
    where ot.term is null
),

targets as (
    select
        ga.protein,
        ga.aspect,
        case
            when oa.protein is not null then 'PK'
            when op.protein is not null then 'LK'
            else 'NK'
        end as mode
    from gained_aspects as ga
    inner join eligible_proteins as ep
        on ep.protein = ga.protein
    left join old_aspects as oa
        on oa.protein = ga.protein
        and oa.aspect = ga.aspect
    left join old_proteins as op
        on op.protein = ga.protein
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
    inner join new_terms as nt
        on nt.protein = t.protein
        and nt.aspect = t.aspect
    left join old_terms as ot
        on ot.protein = t.protein
        and ot.aspect = t.aspect
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
    inner join old_terms as ot
        on ot.protein = t.protein
        and ot.aspect = t.aspect
    left join new_terms as nt
        on nt.protein = t.protein
        and nt.aspect = t.aspect
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
