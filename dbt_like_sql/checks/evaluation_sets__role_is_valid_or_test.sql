-- one row per (window, window_role) whose role is neither 'valid', 'test' nor NULL
with roles as (
    select
        es.window_key,
        es.window_role,
        count(*) as n_rows
    from evaluation_sets as es
    where es.window_role is not null
    group by es.window_key, es.window_role
),

final as (
    select
        r.window_key,
        r.window_role,
        r.n_rows
    from roles as r
    where r.window_role not in ('valid', 'test')
)

select * from final
