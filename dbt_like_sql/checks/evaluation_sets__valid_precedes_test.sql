-- one row per window whose VALID growth does not end at or before the start of its TEST growth
with spans as (
    select distinct
        es.window_key,
        es.window_role,
        es.old_release,
        es.new_release
    from evaluation_sets as es
    where es.window_role in ('valid', 'test')
),

final as (
    select
        v.window_key,
        v.old_release as valid_old_release,
        v.new_release as valid_new_release,
        t.old_release as test_old_release,
        t.new_release as test_new_release
    from spans as v
    inner join spans as t
        on t.window_key = v.window_key
    where v.window_role = 'valid'
        and t.window_role = 'test'
        and (
            v.new_release > t.old_release
            or v.old_release >= v.new_release
            or t.old_release >= t.new_release
        )
)

select * from final
