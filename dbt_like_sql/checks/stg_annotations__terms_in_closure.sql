-- one row per annotated term of the release absent from that release's closure (propagation would drop it)
with staged_terms as (
    select
        sa.term,
        count(*) as n_annotations
    from stg_annotations as sa
    where sa.release_id = :release_id
    group by sa.term
),

closure_terms as (
    select distinct tc.term
    from stg_term_closure as tc
    where tc.release_id = :release_id
),

final as (
    select
        :release_id as release_id,
        st.term,
        st.n_annotations
    from staged_terms as st
    left join closure_terms as ct
        on ct.term = st.term
    where ct.term is null
)

select * from final
