-- one row per term of the release's closure that lacks its own (term = ancestor) row
with closure as (
    select
        tc.term,
        tc.ancestor
    from stg_term_closure as tc
    where tc.release_id = :release_id
),

mentioned as (
    select c.term from closure as c
    union
    select c.ancestor as term from closure as c
),

final as (
    select
        :release_id as release_id,
        m.term
    from mentioned as m
    left join closure as c
        on c.term = m.term
        and c.ancestor = m.term
    where c.term is null
)

select * from final
