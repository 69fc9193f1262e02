//! Upgrades: a released migration keeps its text, and databases created by earlier
//! releases (including before five migrations were edited) still start and upgrade.

use sha2::{Digest, Sha384};
use sqlx::migrate::{Migration, Migrator};
use std::borrow::Cow;
use std::path::Path;
use store::dialect::Backend;
use store::migrations::{migrator, EDITED_AFTER_RELEASE};
use store::sql::Sql;
use store::testing::TestDb;
use store::Db;

/// Every migration as released: (backend, file, SHA-384 of its text). A new migration is
/// added here when it is committed; an existing line never changes. A failure here means a
/// released migration was edited: put the change in a new migration instead.
const RELEASED: &[(&str, &str, &str)] = &[
    (
        "sqlite",
        "0001_foundation.sql",
        "478010d869c5faec09caf861d02455bb0beedafec379de73b4e64431a568bbb1f57a48a9347521b55d15622b1827d829",
    ),
    (
        "sqlite",
        "0002_ingest.sql",
        "f51528051b0d79f48001414ac72adf45f49d74525d95ccddcb9645ace30b9500cc200a187629beed812cb666f8b950ff",
    ),
    (
        "sqlite",
        "0003_run_search.sql",
        "03959e1b0a2d331fce51d00d5ea6b37b718e227eae26829001f13559f204d2421aa07e313f2c14fafff7cc49011d3ccb",
    ),
    (
        "sqlite",
        "0004_approvals.sql",
        "73df3d7688ab254514819ea249d0180077c66b47c685af6f4b7d2a45c4436f60f58ea79e0b0e24368c828179e34d02f8",
    ),
    (
        "sqlite",
        "0005_webhooks.sql",
        "bd7883ae6917c4ba6a4053c1253f9a0bdab9ff3d159479c1aa296215d72a5bc4c8c27aee1d6e54363fcac45b59df6354",
    ),
    (
        "sqlite",
        "0006_run_tools.sql",
        "27a08684882649260571dd6b02d5df1e617e6fb65462797f2a04db54fe3544521d41548a4bfe0c7fd5945a28672e8daf",
    ),
    (
        "sqlite",
        "0007_run_reason_counts.sql",
        "a2024f519dd6929524ac108626d700e842c57a607fc14dc754769ec76edf7d11c29f34ecffc6efec16e973aff6b75619",
    ),
    (
        "sqlite",
        "0008_escalations.sql",
        "16fdeccee31b038f4fdaf903d3373d041aac204a4986750740ac60b22d3c86777522bfd31c0d9efed28b01764a80d6ea",
    ),
    (
        "sqlite",
        "0009_alerts.sql",
        "a94be771a2c1441bd95468a80e80ec98b4c52cc9d8c186e07cee19bf7b15102deffa53d41578458b4ab26b523732a4bb",
    ),
    (
        "sqlite",
        "0010_trends.sql",
        "f84d9be6e409b30eb0ba4265d1f0dbde0fcb712eac366f9dd1833a8bf0b1acba500448d6d52e9a6893ed19b4f63d25b7",
    ),
    (
        "sqlite",
        "0011_metrics.sql",
        "fa6c0fedc4f2bf628317ffe363f0b15cbc047c5b01f46137a422e0a27dcea111357a438922a112203ed06b82e295556b",
    ),
    (
        "sqlite",
        "0012_spans_tool_name_index.sql",
        "99ff6e9f6388912fd82cec630f83b4ea526d2d5103d0694e9998dcc8a2af1b3228f85fa592b27a6d208c050d2f1403c6",
    ),
    (
        "sqlite",
        "0013_span_chunks.sql",
        "5a13edfa0a35710329f5ef6b57e44c1d0dc0ca873602e8ecb0478ecb36d3fc23c6e8016b6ca94c87a29c8b37ae8bae58",
    ),
    (
        "sqlite",
        "0014_body_chunks.sql",
        "7e3bd02662841f69a8e787930323e674d08b2df5bbe3b32d39c707c879f8764ed413152bae2ecec4aac949f04e7ba02d",
    ),
    (
        "sqlite",
        "0015_run_terms_fts.sql",
        "ff28f6be17b60c28dc457c70651a203dcd3c6f4a6d9883c28babf9d2181bd9fd3a39ad75f34447d0ac6ce0892e4c232f",
    ),
    (
        "sqlite",
        "0016_run_numbers.sql",
        "337124a95bd9e0d967381e697d6d39b85a45d4ec75655a152e030cb970c8c06a466f183121cd62eaf56d3397ee025c39",
    ),
    (
        "sqlite",
        "0017_security.sql",
        "fa5acadc2be52718c43b8b8348070ae3b56418f4be5d1ada40f9ff810002394d5f841491ec0793c62f47a29837d152c6",
    ),
    (
        "sqlite",
        "0018_prices_and_tools.sql",
        "2c85b2d32c4993e3208ec7aa0fae4ebe9faa93d7322ec8bbdeca49d500433e06d17b13c06a2fa89c93e99664c24caf05",
    ),
    (
        "sqlite",
        "0019_repair_edited_migrations.sql",
        "b808e6a3dcdae4f04ffe3418cff099c4d1c06924c1cc96c562e2b345d95802d27bc912cf6bc09183b2933eb61ff5f247",
    ),
    (
        "sqlite",
        "0020_execution_ledger.sql",
        "1ad65bc9a8ec0c8400596442c5d1520cc227f1845926bb96bc76fe4843dc7517f1b911a9605073cf762c70ac5ea6ec93",
    ),
    (
        "sqlite",
        "0021_ledger_hours.sql",
        "0c7a081d09fa6c272c56a3e9e3c0d9df6abdf7e992d7a3dda6fca0493f1f2da65209f2017afb126645f1c4eea273a992",
    ),
    (
        "sqlite",
        "0022_alert_severities.sql",
        "3431d93467a496859a0bda1963c6cabc6b38928120b2a8691a78d87bf2810a8d13cc0b6b044c0bf11b1904c0e21b1eb7",
    ),
    (
        "sqlite",
        "0023_webhook_order.sql",
        "74466db6ec40934ed687715c1f19f23b0890b3498c7a398992b56da0ad156e5a33f804e6408aa28fb3000f4c4c733479",
    ),
    (
        "sqlite",
        "0024_alert_silences.sql",
        "d189b1f01cdfacfc1be03671f05e6e6481eac2747896cf0df3db20facdf6363aa577799dc1242cc1ad8db0e022408a14",
    ),
    (
        "sqlite",
        "0025_alert_rule_versions.sql",
        "2b92eb204137e0ae16d65bd83c6738295b3410bd951c35cdaca9e2e86e3eebb4f41db54435d90a9628b9db31b7de000b",
    ),
    (
        "sqlite",
        "0026_maintenance_windows.sql",
        "7a3a2f2954111402e4ecf6a39ab85569930bfdd456720caf633331b2517443b490949b814d7619747991c5cf81821b5d",
    ),
    (
        "sqlite",
        "0027_replay_results.sql",
        "e54a75bddaaff7051e48f7f7310e8a972de6157f14d53094cf149438de7d01ae5812ebfb63616ce3bd3f4c1980a29e9e",
    ),
    (
        "sqlite",
        "0028_approvals_v2.sql",
        "f898f91eb09b058ffb34bace6a9e261b3e40ba2df2ecbfbf56874b50c07469a8ffa97b359a0deacd75b4a174df6f0cdf",
    ),
    (
        "sqlite",
        "0029_page_indexes.sql",
        "6a01b47aa0ef4686631053de89b0a16411dc467bd52e363bd05f6fc2ec2d3447a674fef191402791c9da3bb5bbe399e6",
    ),
    (
        "sqlite",
        "0030_filter_indexes.sql",
        "8c9eb6c27b80dd0c1e6ab1b7f26a471f0c07c5e9c3312804d961dbe1ba9e853b25cbe011921de8e10597042662ffd47d",
    ),
    (
        "sqlite",
        "0031_packed_chunks.sql",
        "b73654364276ba52b85d9331f9f45854dde3e92a525610f764b5b5ecc780770d7598b9eb4e52e58f07de17a80e0f6aee",
    ),
    (
        "sqlite",
        "0032_tool_run_counts.sql",
        "d2078c447e411f8b13ab2b563b3c79ddccaf2cc015af3b0493086b46907a2a7ff1900b77f887d6060ce08e44ba5c12a2",
    ),
    (
        "sqlite",
        "0033_failed_tool.sql",
        "6d1392b432688c5c081268692fe343a423b4c49a6c65c3e065422fc1542be872cfdb5fe400f9b6a80b0bbdf7809c2ceb",
    ),
    (
        "sqlite",
        "0034_chunk_dictionaries.sql",
        "fc81b2d5d1305a99c522625501f033ff564a71a82d607f4db9fcbde6d0ae61667d07efe389f588bfba60692ad8791c2c",
    ),
    (
        "sqlite",
        "0035_sort_indexes.sql",
        "746b271e10433fa8fef664af921fcadf703b4f9b6c49d23966aa39d6d40edd7eee5b26f2b9741e6b3645419d7dcf3589",
    ),
    (
        "sqlite",
        "0036_ledger_file.sql",
        "6e5defd9bb9327c27b76ef6b5df85c0d81167eaa60465acd61793bbd9e472b7d30715794580c5c18bd5b391b2b32fd06",
    ),
    (
        "sqlite",
        "0037_approval_edits.sql",
        "3e1af49a20da0b7914ac4282bc300a66ad089314d50623ea0cecf08cbdd74ecb5ee6f7a821cd34a18dc04d469ea9d598",
    ),
    (
        "sqlite",
        "0038_mcp_gateway.sql",
        "e779705872e64531a3e0fd34a7b41f43f471e21ef238d9377b59f9fb4a25669b092fd154f12344278adbcddc23ee10c5",
    ),
    (
        "sqlite",
        "0039_oncall.sql",
        "83193f1c680f696ba2371ffe092c36d4107bacb5e98547cdc10386980178c831677ddd1cd6ead4baa7b5587f4d24510b",
    ),
    (
        "sqlite",
        "0040_count_indexes.sql",
        "febd7920decf3da407cb4fa7b82fc6988c2e31a2aabdd0dd1203fc5a66db4db9a1ff326af4bf6512f0f605324a3eb973",
    ),
    (
        "sqlite",
        "0041_trend_rollups.sql",
        "54f6841e183048cfc3a7842920fe48f6cfa2b6b4f0045cc979f510d0d9a9c9ac03dd52dce8969dc1e36f584e077357d9",
    ),
    (
        "sqlite",
        "0042_trend_counts.sql",
        "4407dbaa43a328965a5400b569214b6a37d7a248b7cda10a37dbbd7e05ce39676b1b4850d67015a6a0daf3d3ccd68bb5",
    ),
    (
        "sqlite",
        "0043_list_indexes.sql",
        "feb431e99041ad158d31f17a848a1faddc22a9c8e475e2e281067946df76f3bf82faffd3d623c3396ceecdb70d9cfe0f",
    ),
    (
        "sqlite",
        "0046_trend_events.sql",
        "ac28fb51559216319e563ea2903cde6a3f7a4ddc878f20df10ba0e26b936874d522365bc9d157811218a76eb24fde81c",
    ),
    (
        "sqlite",
        "0048_run_partitions.sql",
        "7f65e923c1fb33dc7c42ac795d6ab24f764918b89a76a260491010aa37d09cd94b1bf014b3a5eb791722908a406f5911",
    ),
    (
        "postgres",
        "0001_foundation.sql",
        "d465a1576025ecc5f086b8163e63d062d5758fb665418feac6b7a325d61bff05c96e1145a547bcf6aab37fa04ebcc403",
    ),
    (
        "postgres",
        "0002_ingest.sql",
        "73727eb702ee98fb74ff1389f012a9ae1e4949aabdc906ab829d25a616f2e0dda129d6a1786b9e7685a0849e54624144",
    ),
    (
        "postgres",
        "0003_run_search.sql",
        "03959e1b0a2d331fce51d00d5ea6b37b718e227eae26829001f13559f204d2421aa07e313f2c14fafff7cc49011d3ccb",
    ),
    (
        "postgres",
        "0004_approvals.sql",
        "f5c4a817f33a586f3e0c8fb13f9f65a1d7abec2ee28d56af38e3e790f5d1bd579622424d9a170e4c04200a0250d8d3f8",
    ),
    (
        "postgres",
        "0005_webhooks.sql",
        "2ccd9e34d26bd3c79363d64511abd13ac1971f05cf8a28f61b3671dd1610e8be4da0c643b4e5804372aafe3b30ae04bd",
    ),
    (
        "postgres",
        "0006_run_tools.sql",
        "27a08684882649260571dd6b02d5df1e617e6fb65462797f2a04db54fe3544521d41548a4bfe0c7fd5945a28672e8daf",
    ),
    (
        "postgres",
        "0007_run_reason_counts.sql",
        "a2024f519dd6929524ac108626d700e842c57a607fc14dc754769ec76edf7d11c29f34ecffc6efec16e973aff6b75619",
    ),
    (
        "postgres",
        "0008_escalations.sql",
        "c3e001a4f4b4a69c691166b65388305899ee7f75187fb4964bcfae0003e3af9fa4bd7949af7591b58afc6a9026570a55",
    ),
    (
        "postgres",
        "0009_alerts.sql",
        "b0ad9c1139530c3118fadab20c309663c8889f3a5440937681ae48f4ffab7a2e88eee4a54477f423dfc1adabae1c5cbb",
    ),
    (
        "postgres",
        "0010_trends.sql",
        "f84d9be6e409b30eb0ba4265d1f0dbde0fcb712eac366f9dd1833a8bf0b1acba500448d6d52e9a6893ed19b4f63d25b7",
    ),
    (
        "postgres",
        "0011_metrics.sql",
        "fa6c0fedc4f2bf628317ffe363f0b15cbc047c5b01f46137a422e0a27dcea111357a438922a112203ed06b82e295556b",
    ),
    (
        "postgres",
        "0012_spans_tool_name_index.sql",
        "99ff6e9f6388912fd82cec630f83b4ea526d2d5103d0694e9998dcc8a2af1b3228f85fa592b27a6d208c050d2f1403c6",
    ),
    (
        "postgres",
        "0013_span_chunks.sql",
        "91f57903481b801919b1ca3e0f97657bb7660b9a2e99d60daafe3645b612d2535103f4f35d15434a0e7b646160a8dcb6",
    ),
    (
        "postgres",
        "0014_body_chunks.sql",
        "5496169def5d3d2b323b9ffb7d9f75189317fa2fc40d6de6c7e52549883b33830995474f0b00dd290075939235405539",
    ),
    (
        "postgres",
        "0016_run_numbers.sql",
        "32fa11e61df4ab3276f6e60cd5d114e6a945e94b4788d0769bf04c820a20287dde295fb178cc7826e98f0d873302b2af",
    ),
    (
        "postgres",
        "0017_security.sql",
        "fa5acadc2be52718c43b8b8348070ae3b56418f4be5d1ada40f9ff810002394d5f841491ec0793c62f47a29837d152c6",
    ),
    (
        "postgres",
        "0018_prices_and_tools.sql",
        "2c85b2d32c4993e3208ec7aa0fae4ebe9faa93d7322ec8bbdeca49d500433e06d17b13c06a2fa89c93e99664c24caf05",
    ),
    (
        "postgres",
        "0019_repair_edited_migrations.sql",
        "b808e6a3dcdae4f04ffe3418cff099c4d1c06924c1cc96c562e2b345d95802d27bc912cf6bc09183b2933eb61ff5f247",
    ),
    (
        "postgres",
        "0020_execution_ledger.sql",
        "1ad65bc9a8ec0c8400596442c5d1520cc227f1845926bb96bc76fe4843dc7517f1b911a9605073cf762c70ac5ea6ec93",
    ),
    (
        "postgres",
        "0021_ledger_hours.sql",
        "0c7a081d09fa6c272c56a3e9e3c0d9df6abdf7e992d7a3dda6fca0493f1f2da65209f2017afb126645f1c4eea273a992",
    ),
    (
        "postgres",
        "0022_alert_severities.sql",
        "3431d93467a496859a0bda1963c6cabc6b38928120b2a8691a78d87bf2810a8d13cc0b6b044c0bf11b1904c0e21b1eb7",
    ),
    (
        "postgres",
        "0023_webhook_order.sql",
        "74466db6ec40934ed687715c1f19f23b0890b3498c7a398992b56da0ad156e5a33f804e6408aa28fb3000f4c4c733479",
    ),
    (
        "postgres",
        "0024_alert_silences.sql",
        "d189b1f01cdfacfc1be03671f05e6e6481eac2747896cf0df3db20facdf6363aa577799dc1242cc1ad8db0e022408a14",
    ),
    (
        "postgres",
        "0025_alert_rule_versions.sql",
        "2b92eb204137e0ae16d65bd83c6738295b3410bd951c35cdaca9e2e86e3eebb4f41db54435d90a9628b9db31b7de000b",
    ),
    (
        "postgres",
        "0026_maintenance_windows.sql",
        "7a3a2f2954111402e4ecf6a39ab85569930bfdd456720caf633331b2517443b490949b814d7619747991c5cf81821b5d",
    ),
    (
        "postgres",
        "0027_replay_results.sql",
        "e54a75bddaaff7051e48f7f7310e8a972de6157f14d53094cf149438de7d01ae5812ebfb63616ce3bd3f4c1980a29e9e",
    ),
    (
        "postgres",
        "0028_approvals_v2.sql",
        "f898f91eb09b058ffb34bace6a9e261b3e40ba2df2ecbfbf56874b50c07469a8ffa97b359a0deacd75b4a174df6f0cdf",
    ),
    (
        "postgres",
        "0029_page_indexes.sql",
        "6a01b47aa0ef4686631053de89b0a16411dc467bd52e363bd05f6fc2ec2d3447a674fef191402791c9da3bb5bbe399e6",
    ),
    (
        "postgres",
        "0030_filter_indexes.sql",
        "8c9eb6c27b80dd0c1e6ab1b7f26a471f0c07c5e9c3312804d961dbe1ba9e853b25cbe011921de8e10597042662ffd47d",
    ),
    (
        "postgres",
        "0031_packed_chunks.sql",
        "505ff62f0a36f1ef7e82fa3a10f13119e2951916558c86e7ac72f38cd9c4fba06fc13188d8edeb9e6367fbb581953301",
    ),
    (
        "postgres",
        "0032_tool_run_counts.sql",
        "d2078c447e411f8b13ab2b563b3c79ddccaf2cc015af3b0493086b46907a2a7ff1900b77f887d6060ce08e44ba5c12a2",
    ),
    (
        "postgres",
        "0033_failed_tool.sql",
        "6d1392b432688c5c081268692fe343a423b4c49a6c65c3e065422fc1542be872cfdb5fe400f9b6a80b0bbdf7809c2ceb",
    ),
    (
        "postgres",
        "0034_chunk_dictionaries.sql",
        "56a2f7f50a886243a076db1da462df1035fae83b47450ff6b161f25c276be9b4fb39aa320d0c4c3403f672bdfb7f3cf5",
    ),
    (
        "postgres",
        "0035_sort_indexes.sql",
        "acc5b5d63df5a09a0da1ae2fd32164fe49dc493547a3d5be70a21faa0876ac6d6f02a23f26f1a05f9819a5d6e04997d7",
    ),
    (
        "postgres",
        "0036_ledger_file.sql",
        "1254711b95557d1b231e21f9220ad3bd0581c40ab86983a644ceea0fc121e1085fa4b1d2b23943528f447cb879acff47",
    ),
    (
        "postgres",
        "0037_approval_edits.sql",
        "3e1af49a20da0b7914ac4282bc300a66ad089314d50623ea0cecf08cbdd74ecb5ee6f7a821cd34a18dc04d469ea9d598",
    ),
    (
        "postgres",
        "0038_mcp_gateway.sql",
        "e779705872e64531a3e0fd34a7b41f43f471e21ef238d9377b59f9fb4a25669b092fd154f12344278adbcddc23ee10c5",
    ),
    (
        "postgres",
        "0039_oncall.sql",
        "99d6f607d644e9149305539b15a1b6400413abf3bf9684323eaab8bb58d21a38fc9c7cfc78628e80dcebbaec29bd6b2f",
    ),
    (
        "postgres",
        "0040_count_indexes.sql",
        "febd7920decf3da407cb4fa7b82fc6988c2e31a2aabdd0dd1203fc5a66db4db9a1ff326af4bf6512f0f605324a3eb973",
    ),
    (
        "postgres",
        "0041_trend_rollups.sql",
        "d8894d772f99069885185200f19c6ca0deab0177f7f3ad76e16f352c25bfb0e8695c450c4e33678a31ba497647c14cd7",
    ),
    (
        "postgres",
        "0042_trend_counts.sql",
        "b8b996e0b8205f816f5777a79b525845aa34ced7baf59a0427a934f844258a5916103fb0df2b497f3d1863868031a2b6",
    ),
    (
        "postgres",
        "0043_list_indexes.sql",
        "feb431e99041ad158d31f17a848a1faddc22a9c8e475e2e281067946df76f3bf82faffd3d623c3396ceecdb70d9cfe0f",
    ),
    (
        "postgres",
        "0044_day_partitions.sql",
        "d5a18fa641cc9ca4724fb1e6063daa7a87932f386a412d308a7dc1f84b579f5d81543e239f8f98e75638982a0baff156",
    ),
    (
        "postgres",
        "0045_tool_day_runs.sql",
        "2d1326ddcff55e27b2d5b32ff171f64834a936c04ca9ceec0130e6054380e0fd3fe38bc3452371bc3feadece31c7fd1f",
    ),
    (
        "postgres",
        "0046_trend_events.sql",
        "ac28fb51559216319e563ea2903cde6a3f7a4ddc878f20df10ba0e26b936874d522365bc9d157811218a76eb24fde81c",
    ),
    (
        "postgres",
        "0047_trend_fillfactor.sql",
        "8b4fdbcef1e35ba752fadbbb947618356812a09a8db2bbcc00558e7368e82dc529e3057d9879a5fd4471e03b9515d5b0",
    ),
    (
        "postgres",
        "0048_run_partitions.sql",
        "f90ea26cb0e20891c0a81dd454e3f7f603e1405efe51778164aaf821873789f4424cf6d3d1460be0a077accb06b0c9c7",
    ),
    (
        "postgres",
        "0049_flag_indexes_cover_filters.sql",
        "65c7965e2792df38075a110c4f610eb83111ff77f0b1c23d998add00b47d11e60d7781bf7e70aeacb8e5a8be9e08b53b",
    ),
    (
        "postgres",
        "0050_run_ids_by_number.sql",
        "712a39a6e5f6c899c532bef911aa4eaf2e3e3b4fcdbf04ce36877054ecde7f6ecfd8c7494c6c36a80c9eb154ed0deae5",
    ),
    (
        "postgres",
        "0051_trend_rollups_by_arrival_day.sql",
        "ff0fdca4d6b42876a1a3f569719970cd1a16ae062366331efbd374245ab5067a5a274c18e40f8ec71aca425cc77e7b47",
    ),
    (
        "sqlite",
        "0051_trend_rollups_by_arrival_day.sql",
        "dabdcda6d57f77346c4cd64e72d160a4ffb010496d994bd60e0a8b54aab6a4dc06a8becb572cc2d0f1308f54c50c229a",
    ),
    // The execution ledger's own SQLite file (`Db::ledger`), numbered from 1.
    (
        "sqlite-ledger",
        "0001_call_ledger.sql",
        "14aebbde84824f607640f5296cbe5fdb52802249fc199ebe7da6bdc4be2bd8c0b21e6f8e6d2ea9f9481488ffc2ddb4f7",
    ),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

#[test]
fn every_released_migration_keeps_its_text() {
    for (backend, file, released) in RELEASED {
        let text = std::fs::read(root().join("migrations").join(backend).join(file))
            .unwrap_or_else(|_| panic!("{backend}/{file} was released and must not be removed"));
        assert_eq!(hex::encode(Sha384::digest(&text)), *released, "{backend}/{file} was edited after release");
    }
    for backend in ["sqlite", "postgres", "sqlite-ledger"] {
        for entry in std::fs::read_dir(root().join("migrations").join(backend)).unwrap() {
            let file = entry.unwrap().file_name().into_string().unwrap();
            assert!(
                RELEASED.iter().any(|(b, f, _)| *b == backend && *f == file),
                "{backend}/{file} is not in RELEASED: record its checksum when you commit it"
            );
        }
    }
}

#[test]
fn the_accepted_earlier_texts_are_the_fixtures_kept_of_them() {
    for (backend, version, released) in EDITED_AFTER_RELEASE {
        let text = released_text(*backend, *version);
        assert_eq!(hex::encode(Sha384::digest(text.as_bytes())), *released, "{backend:?} {version}");
    }
}

/// The released text of an edited migration, kept in the test fixtures.
fn released_text(backend: Backend, version: i64) -> String {
    let dir = root().join("app/tests/fixtures/released-migrations").join(match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    });
    let prefix = format!("{version:04}_");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&prefix))
        .unwrap_or_else(|| panic!("no fixture for {backend:?} {version}"));
    std::fs::read_to_string(file).unwrap()
}

/// This build's migrations up to `last`, with the edited ones in their released text: the
/// schema history of a database created before the edits.
fn as_released(backend: Backend, last: i64) -> Migrator {
    let migrations: Vec<Migration> = migrator(backend)
        .iter()
        .filter(|m| m.version <= last)
        .map(|m| {
            if EDITED_AFTER_RELEASE.iter().any(|(b, v, _)| *b == backend && *v == m.version) {
                let text = released_text(backend, m.version);
                Migration::new(m.version, m.description.clone(), m.migration_type, Cow::Owned(text), m.no_tx)
            } else {
                m.clone()
            }
        })
        .collect();
    Migrator { migrations: Cow::Owned(migrations), ignore_missing: false, locking: true, no_tx: false }
}

async fn has_index(db: &Db, name: &str) -> bool {
    let sql = match db.backend() {
        Backend::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = $1",
        Backend::Postgres => "SELECT COUNT(*) FROM pg_indexes WHERE indexname = $1",
    };
    let n: i64 = db.fetch_one_value(Sql::with_args(sql, vec![name.into()])).await.unwrap();
    n > 0
}

#[tokio::test]
async fn a_database_from_before_the_edits_and_one_from_today_both_upgrade() {
    for t in TestDb::each_backend_at(0).await {
        let db = &t.db;
        // Created by the release before the edits: 0001 to 0018 as they were released.
        let old = as_released(db.backend(), 18);
        db.run_migrations(&old).await.unwrap();
        assert!(has_index(db, "runs_trends").await, "the released 0010 made this index, {}", t.backend());
        // Plain sqlx refuses it: the recorded text of 0010 is not today's. (Without the
        // migration lock: sqlx leaves PostgreSQL's advisory lock held on a refusal, and the
        // pooled connection would keep it.)
        let plain = Migrator { locking: false, ..as_released(db.backend(), 0) };
        let plain = Migrator { migrations: migrator(db.backend()).migrations.clone(), ..plain };
        let refused = db.run_migrations(&plain).await.unwrap_err();
        assert!(refused.to_string().contains("10"), "{refused}");
        // Flightdeck accepts exactly those earlier texts and repairs the schema.
        db.migrate().await.unwrap();
        assert!(!has_index(db, "runs_trends").await, "0019 dropped it, {}", t.backend());
        assert!(db.is_ready().await.is_ok());
        db.migrate().await.expect("a second start changes nothing");
        t.cleanup().await;
    }
    // Today's main, from scratch and started again.
    for t in TestDb::each_backend().await {
        assert!(!has_index(&t.db, "runs_trends").await);
        t.db.migrate().await.unwrap();
        assert!(t.db.is_ready().await.is_ok());
        t.cleanup().await;
    }
}

/// A SQLite database of the release before the ledger had a file of its own (migrations up
/// to 0035) keeps its guarded calls and their dedupe counts: `Db::migrate` copies them into
/// the ledger's file, then 0036 drops them from the main one. A start interrupted between
/// the copy and 0036 copies nothing twice.
#[tokio::test]
async fn sqlite_guarded_calls_move_into_the_ledger_file_of_their_own() {
    use store::{ledger, ledger_path, sql::Sql};
    let t = TestDb::sqlite_at_version(35).await;
    let db = &t.db;
    db.execute(Sql::new(
        "INSERT INTO call_ledger (id, idempotency_key, natural_key, run_id, step_index, tool, arguments, state, \
         deduped, external_id, created_at, started_at, completed_at, updated_at) VALUES \
         ('call_1', 'k-1', 'fd-k1', 'run-1', 1, 'send_email', '{}', 'succeeded', 2, 'msg_1', 1, 1, 2, 2), \
         ('call_2', 'k-2', 'fd-k2', 'run-1', 2, 'charge_card', '{}', 'unknown', 0, NULL, 3, 3, NULL, 3)",
    ))
    .await
    .unwrap();
    db.execute(Sql::new("INSERT INTO call_ledger_hours (hour_ms, tool, deduped) VALUES (3600000, 'send_email', 2)"))
        .await
        .unwrap();
    let Db::Sqlite { main, ledger: ledger_pool } = db else { unreachable!() };
    // An interrupted start: the ledger's file migrated and the rows copied, 0036 not run.
    store::migrations::ledger_migrator().run(ledger_pool).await.unwrap();
    assert_eq!(store::migrations::move_ledger_into_its_file(main, ledger_pool).await.unwrap(), 2);
    db.migrate().await.expect("the next start finishes the move");
    assert!(db.is_ready().await.is_ok());
    let (moved, _) = ledger::get(db, "call_1").await.unwrap().expect("the succeeded call is in the ledger's file");
    assert_eq!((moved.external_id.as_deref(), moved.deduped), (Some("msg_1"), 2));
    assert_eq!(ledger::for_run(db, "run-1").await.unwrap().len(), 2, "each entry once");
    assert_eq!(ledger::deduped_hours(db, 0, 7_200_000).await.unwrap(), vec![(3_600_000, 2)]);
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'call_ledger%'")
        .fetch_one(main)
        .await
        .unwrap();
    assert_eq!(left, 0, "the main file keeps no copy");
    let main_file = main.connect_options().get_filename().to_path_buf();
    assert_eq!(ledger_pool.connect_options().get_filename(), ledger_path(&main_file));
    assert!(ledger_path(&main_file).to_string_lossy().ends_with("test.ledger.db"));
    db.migrate().await.expect("a second start changes nothing");
    assert_eq!(ledger::for_run(db, "run-1").await.unwrap().len(), 2);
    t.cleanup().await;
}

#[tokio::test]
async fn alerts_and_saved_rules_move_to_the_new_severity_names() {
    use domain::alerts::{AlertRule, Severity};
    for t in TestDb::each_backend_at(0).await {
        let db = &t.db;
        db.run_migrations(&as_released(db.backend(), 21)).await.unwrap();
        let insert = "INSERT INTO alerts (id, rule, subject, severity, state, title, value, threshold, unit, items, \
                      fired_at, last_breach_at, updated_at) VALUES ($1, 'deduped_spike', $1, $2, 'firing', 't', 1, 1, \
                      'count', '[]', 1, 1, 1)";
        for (id, severity) in [("a1", "critical"), ("a2", "warning")] {
            db.execute(Sql::with_args(insert, vec![id.into(), severity.into()])).await.unwrap();
        }
        let mut saved =
            serde_json::to_value(domain::alerts::settings::RuleSettings::default_for(AlertRule::DedupedSpike)).unwrap();
        saved["severity"] = "warning".into();
        let rule =
            "INSERT INTO alert_rules (rule, settings, updated_by, updated_at) VALUES ('deduped_spike', $1, 'ann', 1)";
        db.execute(Sql::with_args(rule, vec![saved.to_string().into()])).await.unwrap();

        db.migrate().await.unwrap();
        let alerts = store::alerts::list(db, false, 10).await.unwrap();
        let severities: Vec<(String, Severity)> = alerts.iter().map(|a| (a.id.clone(), a.severity)).collect();
        assert_eq!(severities, [("a1".into(), Severity::Page), ("a2".into(), Severity::Ticket)], "{}", t.backend());
        let settings = store::alerts::settings(db).await.unwrap();
        let spike = settings.iter().find(|(r, _)| *r == AlertRule::DedupedSpike).unwrap();
        assert_eq!(spike.1.severity, Severity::Ticket, "the admin's choice kept, under its new name");
        t.cleanup().await;
    }
}

/// 0046 counts the escalations and approvals already stored into the trends' event rows,
/// per bucket size and agent, exactly as a recount from the rows does (which the trends
/// tests hold equal to what every write keeps).
#[tokio::test]
async fn escalations_and_approvals_already_stored_are_counted_for_the_trends() {
    use domain::trends::events::EventKind;
    const HOUR: i64 = 3_600_000;
    let day = 20_000 * 24 * HOUR;
    for t in TestDb::each_backend_at(0).await {
        let db = &t.db;
        db.run_migrations(&as_released(db.backend(), 45)).await.unwrap();
        let escalation = "INSERT INTO escalations (id, run_id, reason, what_was_done, what_remains, from_api, \
                          from_trace, agent, status, opened_at, resolved_at) \
                          VALUES ($1, 'run-1', 'other', '[]', '[]', $2, $3, $4, $5, $6, $7)";
        for (id, agent, opened, resolved) in
            [("e1", Some("billing"), day + HOUR + 5, Some(day + 30 * HOUR)), ("e2", None, day + 7 * HOUR, None)]
        {
            let status = if resolved.is_some() { "resolved" } else { "open" };
            let args =
                vec![id.into(), true.into(), false.into(), agent.into(), status.into(), opened.into(), resolved.into()];
            db.execute(Sql::with_args(escalation, args)).await.unwrap();
        }
        let approval =
            "INSERT INTO approvals (id, run_id, tool, arguments, display, payload_sha256, arguments_sha256, \
                        side_effect, required_role, requested_by, agent, status, created_at, expires_at, decided_at) \
                        VALUES ($1, 'run-1', 'refund', '{}', '[]', 'x', 'y', 'irreversible', 'approver', 'agent-7', \
                        $2, $3, $4, $5, $6)";
        let requests = [
            ("a1", Some("billing"), "approved", Some(day + 2 * HOUR)),
            ("a2", Some("support"), "expired", Some(day + 3 * HOUR)),
            ("a3", None, "denied", Some(day + 26 * HOUR)),
            ("a4", Some("billing"), "cancelled", Some(day + 2 * HOUR)),
            ("a5", Some("billing"), "pending", None),
        ];
        for (id, agent, status, decided) in requests {
            let created = day + HOUR;
            let args = vec![
                id.into(),
                agent.into(),
                status.into(),
                created.into(),
                (created + 2 * HOUR).into(),
                decided.into(),
            ];
            db.execute(Sql::with_args(approval, args)).await.unwrap();
        }
        db.migrate().await.unwrap();
        let migrated = store::trends::all_event_rows(db).await.unwrap();
        let count = |period: i64, scope: &str, kind: EventKind| -> i64 {
            migrated
                .0
                .iter()
                .filter(|(k, _)| k.period_ms == period && k.scope == scope && k.kind == kind)
                .map(|(_, n)| n)
                .sum()
        };
        let backend = t.backend();
        for period in [HOUR, 6 * HOUR, 24 * HOUR] {
            assert_eq!(count(period, "", EventKind::EscalationOpened), 2, "{backend} {period}");
            assert_eq!(count(period, "", EventKind::EscalationResolved), 1, "{backend} {period}");
            assert_eq!(count(period, "", EventKind::ApprovalRequested), 5, "{backend} {period}");
            assert_eq!(count(period, "", EventKind::ApprovalDecided), 2, "approved and denied: {backend} {period}");
            assert_eq!(count(period, "", EventKind::ApprovalExpired), 1, "{backend} {period}");
            assert_eq!(count(period, "billing", EventKind::ApprovalRequested), 3, "{backend} {period}");
            assert_eq!(count(period, "billing", EventKind::ApprovalDecided), 1, "{backend} {period}");
            assert_eq!(count(period, "support", EventKind::ApprovalExpired), 1, "{backend} {period}");
        }
        // Each in its own bucket: the hour e1 opened, the day a3 was denied on.
        let key = |period: i64, kind: EventKind, at: i64| domain::trends::events::EventKey {
            period_ms: period,
            scope: String::new(),
            kind,
            start_ms: at - at.rem_euclid(period),
        };
        assert_eq!(migrated.0.get(&key(HOUR, EventKind::EscalationOpened, day + HOUR)), Some(&1));
        assert_eq!(migrated.0.get(&key(24 * HOUR, EventKind::ApprovalDecided, day + 26 * HOUR)), Some(&1));
        store::trends::rebuild_rollups(db).await.unwrap();
        assert_eq!(store::trends::all_event_rows(db).await.unwrap(), migrated, "{backend}: as a recount");
        t.cleanup().await;
    }
}

/// 0048 partitions `runs` by day on PostgreSQL without copying it: the runs stored so far,
/// numbered before the day partitions or into a day that already had them, stay in
/// `runs_early`, each id listed once in `run_ids`; a day made afterwards gets a `runs`
/// partition of its own, the days made before do not.
#[tokio::test]
async fn runs_stored_before_runs_was_partitioned_stay_in_place_and_are_found_by_id() {
    use store::partitions::{base, day_of, partition_name};
    for t in TestDb::each_backend_at(0).await {
        let db = &t.db;
        if db.backend() != Backend::Postgres {
            t.cleanup().await;
            continue;
        }
        db.run_migrations(&as_released(db.backend(), 47)).await.unwrap();
        let now = store::now_ms();
        let today = day_of(now);
        db.execute(Sql::with_args("INSERT INTO run_no_days (day, created_at) VALUES ($1, 0)", vec![today.into()]))
            .await
            .unwrap();
        let run = "INSERT INTO runs (run_id, run_no, agent, run_trigger, terminal_reason, started_ns, cost, \
                   input_tokens, output_tokens, cache_tokens, steps, tool_calls, trace_ids, duplicate_side_effects, \
                   deduped_calls, completed_without_read, approval_violations, duplicates, updated_at) \
                   VALUES ($1, $2, 'billing', 'api', 'completed', $3, 0.5, 1, 1, 0, 1, 0, '[]', 0, 0, FALSE, 0, '[]', 0)";
        let numbered = [("before-days", 7), ("on-a-day", base(today) + 3)];
        for (id, no) in numbered {
            db.execute(Sql::with_args(run, vec![id.into(), no.into(), (now * 1_000_000).into()])).await.unwrap();
        }
        db.migrate().await.unwrap();

        for (id, no) in numbered {
            let found = store::runs::get(db, id).await.unwrap().unwrap_or_else(|| panic!("{id} is found by id"));
            assert_eq!((found.run.agent.as_deref(), found.run.cost), (Some("billing"), 0.5), "{id}");
            let sql = Sql::with_args("SELECT tableoid::regclass::text FROM runs WHERE run_no = $1", vec![no.into()]);
            assert_eq!(db.fetch_one_value::<String>(sql).await.unwrap(), "runs_early", "{id} was not moved");
        }
        let listed: Vec<(String, i64)> =
            db.fetch_all(Sql::new("SELECT run_id, run_no FROM run_ids ORDER BY run_id")).await.unwrap();
        assert_eq!(listed, [("before-days".to_string(), 7), ("on-a-day".to_string(), base(today) + 3)]);

        store::partitions::ensure_days(db, now).await.unwrap();
        let exists = |name: String| async move {
            let sql = Sql::with_args("SELECT to_regclass($1)::text", vec![name.into()]);
            db.fetch_value::<Option<String>>(sql).await.unwrap().flatten().is_some()
        };
        assert!(!exists(partition_name("runs", today)).await, "today's runs stay in runs_early");
        assert!(exists(partition_name("runs", today + 1)).await, "a day made after 0048 has its own");
        assert!(exists(partition_name("span_chunks", today + 1)).await);
        let flags: Vec<(i64, bool)> =
            db.fetch_all(Sql::new("SELECT day, runs_partition FROM run_no_days ORDER BY day")).await.unwrap();
        assert_eq!(flags, [(today, false), (today + 1, true)]);
        t.cleanup().await;
    }
}

/// 0051 keeps the trends' rollups per arrival day of the runs they count (ADR 0023). On
/// PostgreSQL the rows stored before cannot be split by day: the first start counts every
/// run again, each into its day's partition (runs numbered before the day partitions into
/// `_early`). SQLite numbers runs from 1, every run is day 0, and its rows are copied.
#[tokio::test]
async fn the_rollups_are_kept_per_arrival_day_from_0051() {
    use store::partitions::{base, day_of, partition_name};
    for t in TestDb::each_backend_at(0).await {
        let db = &t.db;
        let now = store::now_ms();
        let today = day_of(now);
        if db.backend() == Backend::Postgres {
            db.run_migrations(&as_released(db.backend(), 47)).await.unwrap();
            let listed = "INSERT INTO run_no_days (day, created_at) VALUES ($1, 0)";
            db.execute(Sql::with_args(listed, vec![today.into()])).await.unwrap();
            let run = "INSERT INTO runs (run_id, run_no, agent, run_trigger, terminal_reason, started_ns, cost, \
                       input_tokens, output_tokens, cache_tokens, steps, tool_calls, trace_ids, \
                       duplicate_side_effects, deduped_calls, completed_without_read, approval_violations, \
                       duplicates, updated_at) \
                       VALUES ($1, $2, 'billing', 'api', $3, $4, 0.5, 1, 1, 0, 1, 2, '[]', 0, 0, FALSE, 0, '[]', 0)";
            let numbered = [("before-days", 7, "completed"), ("on-a-day", base(today) + 3, "error")];
            for (id, no, reason) in numbered {
                let args = vec![id.into(), no.into(), reason.into(), (now * 1_000_000).into()];
                db.execute(Sql::with_args(run, args)).await.unwrap();
            }
            db.migrate().await.unwrap();
            let kept = store::trends::all_rows(db).await.unwrap();
            assert_eq!(kept.0.keys().copied().collect::<Vec<_>>(), [0, today], "a day for each run's number");
            let runs_of = |day: i64, reason: &str| -> i64 {
                let rows = &kept.0[&day].groups;
                rows.iter().filter(|(k, _)| k.period_ms == 3_600_000 && k.reason == reason).map(|(_, s)| s.runs).sum()
            };
            assert_eq!((runs_of(0, "completed"), runs_of(0, "error")), (1, 0));
            assert_eq!((runs_of(today, "completed"), runs_of(today, "error")), (0, 1));
            for table in store::partitions::TREND_TABLES {
                let sql = format!("SELECT DISTINCT tableoid::regclass::text FROM {table} ORDER BY 1");
                let held: Vec<String> = db.fetch_column(Sql::new(sql)).await.unwrap();
                assert_eq!(held, [partition_name(table, today), format!("{table}_early")], "{table}");
            }
            let mut tx = store::sql::Tx::begin_write(db).await.unwrap();
            let reasons = store::trends::runs_per_reason(&mut tx, today).await.unwrap();
            tx.commit().await.unwrap();
            assert_eq!(reasons.into_iter().collect::<Vec<_>>(), [("error".to_string(), 1)]);
        } else {
            db.run_migrations(&as_released(db.backend(), 50)).await.unwrap();
            let group = "INSERT INTO trend_runs (period_ms, start_ms, agent, model, terminal_reason, runs, \
                         tool_calls, no_read, deduped_calls, duplicate_side_effects, cost_nano) \
                         VALUES (3600000, 0, 'billing', '', 'completed', 4, 8, 1, 0, 0, 500)";
            db.execute(Sql::new(group)).await.unwrap();
            let value = "INSERT INTO trend_values (period_ms, scope, measure, start_ms, value, runs, value_sum) \
                         VALUES (3600000, '', 'tool_calls', 0, 2, 4, 8)";
            db.execute(Sql::new(value)).await.unwrap();
            db.execute(Sql::new("INSERT INTO trend_rollups_built (built_at) VALUES (1)")).await.unwrap();
            db.migrate().await.unwrap();
            let kept = store::trends::all_rows(db).await.unwrap();
            assert_eq!(kept.0.keys().copied().collect::<Vec<_>>(), [0], "every SQLite run is day 0");
            let day0 = &kept.0[&0];
            let groups: Vec<_> = day0.groups.values().map(|s| (s.runs, s.tool_calls, s.no_read, s.cost_nano)).collect();
            assert_eq!(groups, [(4, 8, 1, 500)], "copied as it was");
            assert_eq!(day0.values.values().map(|s| (s.runs, s.sum)).collect::<Vec<_>>(), [(4, 8)]);
        }
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_text_that_was_never_released_is_still_refused() {
    for t in TestDb::each_backend_at(0).await {
        let db = &t.db;
        db.run_migrations(&migrator(db.backend())).await.unwrap();
        let sql = "UPDATE _sqlx_migrations SET checksum = $1 WHERE version = 10";
        db.execute(Sql::with_args(sql, vec![vec![7u8; 48].into()])).await.unwrap();
        // Flightdeck's start refuses it too (and stops; the lock goes with the process).
        let plain = Migrator { locking: false, ..as_released(db.backend(), 0) };
        let plain = Migrator { migrations: migrator(db.backend()).migrations.clone(), ..plain };
        assert!(store::migrations::accept_released_texts(db).await.unwrap() == 0);
        let err = db.run_migrations(&plain).await.unwrap_err();
        assert!(err.to_string().contains("10"), "{err}");
        t.cleanup().await;
    }
}

/// Databases the previous release (0.2.0, see CHANGELOG.md) created and filled through
/// its own binary: its demo runs, two pending approval requests and a cancelled one, and
/// an escalation filed through the API. This build migrates them and serves them
/// unchanged.
mod previous_release {
    use super::*;
    use store::{approvals, escalations, runs, spans};

    const RUN: &str = "run_ca770866dc5ff770d0dd1d45";

    async fn serves_what_it_stored(db: &Db) {
        db.migrate().await.expect("the previous release's database upgrades");
        assert!(db.is_ready().await.is_ok());
        let page = runs::list(db, &runs::RunQuery { limit: 100, ..Default::default() }).await.unwrap();
        assert_eq!(page.runs.len(), 15, "{}", db.backend_name());
        // The trends' rollups are filled from the runs it stored, once, at the upgrade.
        let rollups = store::trends::all_rows(db).await.unwrap().summed();
        let counted: i64 = rollups.groups.iter().filter(|(k, _)| k.period_ms == 3_600_000).map(|(_, s)| s.runs).sum();
        assert_eq!(counted, 15, "every stored run counted once per bucket size");
        assert_eq!(store::trends::build_rollups_if_new(db).await.unwrap(), None, "and never again");
        // So are the trends' counts of its approval requests and escalation (0046).
        let events = store::trends::all_event_rows(db).await.unwrap();
        let hourly = |kind: domain::trends::events::EventKind| -> i64 {
            events
                .0
                .iter()
                .filter(|(k, _)| k.period_ms == 3_600_000 && k.scope.is_empty() && k.kind == kind)
                .map(|(_, n)| n)
                .sum()
        };
        use domain::trends::events::EventKind::{ApprovalRequested, EscalationOpened};
        assert_eq!((hourly(ApprovalRequested), hourly(EscalationOpened)), (3, 1));
        assert_eq!(spans::count(db).await.unwrap(), 178);
        let run = runs::get(db, RUN).await.unwrap().expect("the run is there");
        assert!(run.run.steps > 0 && !run.step_list.is_empty(), "steps derive again from the stored spans");
        let mut statuses: Vec<String> =
            approvals::for_run(db, RUN).await.unwrap().iter().map(|a| a.status.as_str().to_string()).collect();
        statuses.sort();
        assert_eq!(statuses, ["cancelled", "pending", "pending"]);
        let open = escalations::list(db, true, 10).await.unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].run_id, RUN);
        assert_eq!(open[0].what_was_done[0].external_id.as_deref(), Some("msg_1"));
        assert_eq!(open[0].what_remains[0].description, "call the customer");
        assert_eq!(open[0].needed_at, open[0].opened_at, "an older escalation needed a person when it was stored");
        // Each tool's run count, kept in `tools` since 0032, is filled from what was stored.
        let mut kept: Vec<(String, i64)> =
            store::tools::list(db, 100).await.unwrap().into_iter().map(|t| (t.tool_name, t.runs)).collect();
        kept.sort();
        let counted: Vec<(String, i64)> = db
            .fetch_all(store::sql::Sql::new(
                "SELECT tool_name, COUNT(*) FROM run_tools GROUP BY tool_name ORDER BY tool_name",
            ))
            .await
            .unwrap();
        assert_eq!(kept, counted);
        assert!(kept.iter().any(|(_, runs)| *runs > 1), "{kept:?}");
        if let Db::Postgres(_) = db {
            // 0045 counted them per arrival day: all of them day 0, from before the days.
            let per_day: Vec<(i64, String, i64)> = db
                .fetch_all(store::sql::Sql::new("SELECT day, tool_name, runs FROM tool_day_runs ORDER BY tool_name"))
                .await
                .unwrap();
            let day_zero: Vec<(i64, String, i64)> = kept.into_iter().map(|(tool, n)| (0, tool, n)).collect();
            assert_eq!(per_day, day_zero);
        }
    }

    #[tokio::test]
    async fn a_sqlite_file_from_the_previous_release_upgrades_and_serves() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("flightdeck.db");
        std::fs::copy(root().join("app/tests/fixtures/previous-release/0.2.0/flightdeck.db"), &file).unwrap();
        let db = Db::connect(&format!("sqlite://{}", file.display())).await.unwrap();
        serves_what_it_stored(&db).await;
        db.close().await;
    }

    #[tokio::test]
    async fn a_postgres_dump_from_the_previous_release_upgrades_and_serves() {
        let Some(t) = TestDb::postgres_empty().await else { return };
        let dump =
            std::fs::read_to_string(root().join("app/tests/fixtures/previous-release/0.2.0/postgres.sql")).unwrap();
        // On a connection of its own: the dump sets an empty search_path for its session.
        {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(&t.url).await.unwrap();
            sqlx::raw_sql(&dump).execute(&mut conn).await.expect("the dump loads");
            conn.close().await.unwrap();
        }
        serves_what_it_stored(&t.db).await;
        t.cleanup().await;
    }
}
