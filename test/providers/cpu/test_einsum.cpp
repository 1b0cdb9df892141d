// Tests of the CPU Einsum kernel (einsum.cpp): the ONNX backend cases and numpy.einsum results (pasted as literals),
// the fast and general paths, types, errors, threads.
#include "misc_support.hpp"

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::misc;

// ---------------------------------------------------------------------------------------------------------------
// ONNX backend test data (onnx 1.12, /usr/share/libonnx-testdata/data/node/test_einsum_*), extracted with
// /usr/bin/python3 and onnx.numpy_helper.

namespace {
std::vector<backend_case> einsum_backend_cases() {
  std::vector<backend_case> cases;
  {
    backend_case c;
    c.name = "test_einsum_batch_diagonal";
    c.node = op("Einsum", 12);
    c.node.set("equation", std::string("...ii ->...i"));
    c.inputs.push_back({tensor::from<double>({3,5,5}, {1.764052345967664, 0.40015720836722329, 0.9787379841057392, 2.2408931992014578, 1.8675579901499675, -0.97727787987641102, 0.95008841752558937, -0.15135720829769789, -0.10321885179355784, 0.41059850193837233, 0.14404357116087799, 1.4542735069629751,
           0.76103772514699342, 0.12167501649282841, 0.44386323274542566, 0.33367432737426683, 1.4940790731576061, -0.20515826376580087, 0.31306770165090136, -0.85409573930172478, -2.5529898158340787, 0.65361859544036061, 0.86443619885950573, -0.74216502040644194,
           2.2697546239876076, -1.4543656745987648, 0.045758517301446068, -0.1871838500258336, 1.5327792143584575, 1.469358769900285, 0.1549474256969163, 0.37816251960217356, -0.88778574763011275, -1.980796468223927, -0.34791214932615261, 0.15634896910398005,
           1.2302906807277207, 1.2023798487844113, -0.38732681740795227, -0.30230275057533557, -1.0485529650670926, -1.4200179371789752, -1.7062701906250126, 1.9507753952317897, -0.5096521817516535, -0.43807430161118638, -1.2527953600499262, 0.77749035583191006,
           -1.6138978475579515, -0.21274028021396871, -0.89546656119367563, 0.38690249785926201, -0.51080513756887302, -1.1806321841224121, -0.028182228338654868, 0.42833187053041766, 0.066517222383167887, 0.30247189773978139, -0.63432209368096359, -0.36274116598713813,
           -0.67246044777595104, -0.35955316154054129, -0.81314628204445405, -1.7262826023316769, 0.17742614225375283, -0.40178093620826189, -1.6301983469660446, 0.46278225552577418, -0.90729836438324218, 0.051945395796138952, 0.72909056217753687, 0.12898291075741067,
           1.1394006845433007, -1.2348258203536526, 0.402341641177549})});
    c.expected = tensor::from<double>({3,5}, {1.764052345967664, 0.95008841752558937, 0.76103772514699342, 0.31306770165090136, 2.2697546239876076, -1.4543656745987648, 0.37816251960217356, 1.2023798487844113, 1.9507753952317897, -0.21274028021396871, -0.89546656119367563, 0.066517222383167887,
           -0.81314628204445405, -0.90729836438324218, 0.402341641177549});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_einsum_batch_matmul";
    c.node = op("Einsum", 12);
    c.node.set("equation", std::string("bij, bjk -> bik"));
    c.inputs.push_back({tensor::from<double>({5,2,3}, {1.764052345967664, 0.40015720836722329, 0.9787379841057392, 2.2408931992014578, 1.8675579901499675, -0.97727787987641102, 0.95008841752558937, -0.15135720829769789, -0.10321885179355784, 0.41059850193837233, 0.14404357116087799, 1.4542735069629751,
           0.76103772514699342, 0.12167501649282841, 0.44386323274542566, 0.33367432737426683, 1.4940790731576061, -0.20515826376580087, 0.31306770165090136, -0.85409573930172478, -2.5529898158340787, 0.65361859544036061, 0.86443619885950573, -0.74216502040644194,
           2.2697546239876076, -1.4543656745987648, 0.045758517301446068, -0.1871838500258336, 1.5327792143584575, 1.469358769900285})});
    c.inputs.push_back({tensor::from<double>({5,3,4}, {0.1549474256969163, 0.37816251960217356, -0.88778574763011275, -1.980796468223927, -0.34791214932615261, 0.15634896910398005, 1.2302906807277207, 1.2023798487844113, -0.38732681740795227, -0.30230275057533557, -1.0485529650670926, -1.4200179371789752,
           -1.7062701906250126, 1.9507753952317897, -0.5096521817516535, -0.43807430161118638, -1.2527953600499262, 0.77749035583191006, -1.6138978475579515, -0.21274028021396871, -0.89546656119367563, 0.38690249785926201, -0.51080513756887302, -1.1806321841224121,
           -0.028182228338654868, 0.42833187053041766, 0.066517222383167887, 0.30247189773978139, -0.63432209368096359, -0.36274116598713813, -0.67246044777595104, -0.35955316154054129, -0.81314628204445405, -1.7262826023316769, 0.17742614225375283, -0.40178093620826189,
           -1.6301983469660446, 0.46278225552577418, -0.90729836438324218, 0.051945395796138952, 0.72909056217753687, 0.12898291075741067, 1.1394006845433007, -1.2348258203536526, 0.402341641177549, -0.6848100909403132, -0.87079714918188178, -0.57884966476441546,
           -0.31155253212737266, 0.056165342229745438, -1.1651498407833565, 0.9008264869541871, 0.46566243973045984, -1.5362436862772237, 1.4882521937955997, 1.8958891760305832, 1.1787795711596507, -0.17992483581235091, -1.0707526215105425, 1.0544517269311366})});
    c.expected = tensor::from<double>({5,2,4}, {-0.2449756530890492, 0.43378746218127495, -2.1000494618012033, -4.402913186196848, 0.076000449069409337, 1.4348463760343186, 1.3329337654266886, -0.80548712181988424, -1.3390589067506009, 1.6957947068814332, -0.18721484237474798, -0.26214604663510777,
           -2.1833023980833026, 1.4756399947121031, -1.1845844105749435, -1.9274786285080947, -0.45955462759799476, -0.48439320150081144, 0.047553420605969635, 0.0081081029154005113, -0.7903073724831986, -0.044879494818498677, -1.0189144324021775, -0.35384506803075438,
           -2.1602497048529434, 1.7830316105326642, 0.9659331698437077, 2.5487191966595786, -0.73387957197495068, 0.92222268006170438, 1.0381872981434612, -0.60387368849807177, -1.3304520633035486, 2.3535085366619999, -4.8580631969160351, -0.66441090869711905,
           2.5041254116379257, -2.6296097709354722, 0.92593950661784952, 4.286727244116296});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_einsum_inner_prod";
    c.node = op("Einsum", 12);
    c.node.set("equation", std::string("i,i"));
    c.inputs.push_back({tensor::from<double>({5}, {1.764052345967664, 0.40015720836722329, 0.9787379841057392, 2.2408931992014578, 1.8675579901499675})});
    c.inputs.push_back({tensor::from<double>({5}, {-0.97727787987641102, 0.95008841752558937, -0.15135720829769789, -0.10321885179355784, 0.41059850193837233})});
    c.expected = tensor::from<double>({}, {-0.95640956670332899});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_einsum_sum";
    c.node = op("Einsum", 12);
    c.node.set("equation", std::string("ij->i"));
    c.inputs.push_back({tensor::from<double>({3,4}, {1.764052345967664, 0.40015720836722329, 0.9787379841057392, 2.2408931992014578, 1.8675579901499675, -0.97727787987641102, 0.95008841752558937, -0.15135720829769789, -0.10321885179355784, 0.41059850193837233, 0.14404357116087799, 1.4542735069629751})});
    c.expected = tensor::from<double>({3}, {5.3838407376420836, 1.6890113195014478, 1.9056967282686674});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_einsum_transpose";
    c.node = op("Einsum", 12);
    c.node.set("equation", std::string("ij->ji"));
    c.inputs.push_back({tensor::from<double>({3,4}, {1.764052345967664, 0.40015720836722329, 0.9787379841057392, 2.2408931992014578, 1.8675579901499675, -0.97727787987641102, 0.95008841752558937, -0.15135720829769789, -0.10321885179355784, 0.41059850193837233, 0.14404357116087799, 1.4542735069629751})});
    c.expected = tensor::from<double>({4,3}, {1.764052345967664, 1.8675579901499675, -0.10321885179355784, 0.40015720836722329, -0.97727787987641102, 0.41059850193837233, 0.9787379841057392, 0.95008841752558937, 0.14404357116087799, 2.2408931992014578, -0.15135720829769789, 1.4542735069629751});
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Einsum

namespace {
// Generated with numpy.einsum from integer-valued inputs (so float results are exact).
struct einsum_case { std::string eq; std::vector<tensor> in; tensor out; };
std::vector<einsum_case> einsum_numpy_cases() {
  std::vector<einsum_case> cs;
  cs.push_back({"ij,jk->ik", {tensor::from<float>({2,3}, {3.f, 1.f, 1.f, 3.f, 1.f, 2.f}),
                 tensor::from<float>({3,4}, {2.f, -2.f, -3.f, -1.f, -2.f, 3.f, 3.f, -3.f, 0.f, 2.f, -3.f, 2.f})}, tensor::from<float>({2,4}, {4.f, -1.f, -9.f, -4.f, 4.f, 1.f, -12.f, -2.f})});
  cs.push_back({"ij,jk->ki", {tensor::from<float>({2,3}, {-3.f, 0.f, 2.f, -1.f, -1.f, -2.f}),
                 tensor::from<float>({3,4}, {2.f, -2.f, 3.f, 0.f, 0.f, 0.f, 1.f, 0.f, 0.f, 3.f, 2.f, 2.f})}, tensor::from<float>({4,2}, {-6.f, -2.f, 12.f, -4.f, -5.f, -8.f, 4.f, -4.f})});
  cs.push_back({"ij,kj->ik", {tensor::from<float>({2,3}, {1.f, 1.f, -1.f, 3.f, 0.f, -2.f}),
                 tensor::from<float>({4,3}, {2.f, -2.f, 3.f, 1.f, -3.f, -3.f, 0.f, -3.f, -3.f, 0.f, 3.f, 0.f})}, tensor::from<float>({2,4}, {-3.f, 1.f, 0.f, 3.f, 0.f, 9.f, 6.f, 0.f})});
  cs.push_back({"ji,jk->ik", {tensor::from<float>({3,2}, {2.f, 3.f, 2.f, 1.f, 0.f, 0.f}),
                 tensor::from<float>({3,4}, {-2.f, 0.f, -1.f, -2.f, 3.f, -3.f, -3.f, -2.f, 3.f, 1.f, 3.f, -2.f})}, tensor::from<float>({2,4}, {2.f, -6.f, -8.f, -8.f, -3.f, -3.f, -6.f, -8.f})});
  cs.push_back({"ji,kj->ik", {tensor::from<float>({3,2}, {2.f, -1.f, 0.f, -3.f, 1.f, 2.f}),
                 tensor::from<float>({4,3}, {1.f, -2.f, 0.f, -2.f, 3.f, 3.f, -2.f, 0.f, 3.f, 2.f, 1.f, 1.f})}, tensor::from<float>({2,4}, {2.f, -1.f, -1.f, 5.f, 5.f, -1.f, 8.f, -3.f})});
  cs.push_back({"bij,bjk->bik", {tensor::from<float>({2,2,3}, {-3.f, 2.f, 0.f, -3.f, -2.f, 0.f, 2.f, 0.f, 1.f, 3.f, 1.f, -1.f}),
                 tensor::from<float>({2,3,4}, {1.f, 1.f, -3.f, -3.f, 1.f, -1.f, 1.f, -1.f, -2.f, -2.f, -1.f, 2.f, -1.f, -1.f, 1.f, 3.f, -1.f, 1.f, 0.f, 1.f, 0.f, 1.f, 0.f, 1.f})}, tensor::from<float>({2,2,4}, {-1.f, -5.f, 11.f, 7.f, -5.f, -1.f, 7.f, 11.f, -2.f, -1.f, 2.f, 7.f, -4.f, -3.f, 3.f, 9.f})});
  cs.push_back({"bij,bkj->bki", {tensor::from<float>({2,2,3}, {3.f, -2.f, 0.f, 0.f, -1.f, -2.f, -3.f, -1.f, 2.f, -3.f, -1.f, 3.f}),
                 tensor::from<float>({2,4,3}, {3.f, -2.f, -3.f, 1.f, -3.f, -1.f, 0.f, 3.f, -3.f, 1.f, 0.f, -3.f, 2.f, 2.f, 0.f, 3.f, 1.f, 3.f, 3.f, 0.f, -2.f, -2.f, 0.f, -2.f})}, tensor::from<float>({2,4,2}, {13.f, 8.f, 9.f, 5.f, -6.f, 3.f, 3.f, 6.f, -8.f, -8.f, -4.f, -1.f, -13.f, -15.f, 2.f, 0.f})});
  cs.push_back({"ibj,jbk->bik", {tensor::from<float>({2,3,3}, {2.f, 3.f, -2.f, 0.f, -3.f, -2.f, -1.f, 3.f, 3.f, 1.f, 1.f, 0.f, -3.f, -1.f, 3.f, -1.f, -2.f, -2.f}),
                 tensor::from<float>({3,3,2}, {1.f, -3.f, 3.f, 3.f, 0.f, 0.f, 2.f, 0.f, 0.f, -1.f, 0.f, 2.f, -3.f, -3.f, 2.f, -1.f, 2.f, -3.f})}, tensor::from<float>({3,2,2}, {14.f, 0.f, 3.f, -3.f, -4.f, 5.f, -3.f, -11.f, 6.f, -3.f, -4.f, 2.f})});
  cs.push_back({"abc,cbd->ad", {tensor::from<float>({2,3,2}, {3.f, -3.f, -1.f, 3.f, -3.f, 1.f, 2.f, -1.f, -3.f, 0.f, 0.f, 3.f}),
                 tensor::from<float>({2,3,3}, {1.f, -1.f, -3.f, 1.f, -2.f, 1.f, 3.f, -1.f, 3.f, 0.f, 0.f, 2.f, 2.f, 3.f, 3.f, -2.f, -1.f, 3.f})}, tensor::from<float>({2,3}, {-3.f, 10.f, -13.f, -7.f, 1.f, -2.f})});
  cs.push_back({"bxy,byz,bz->bxz", {tensor::from<float>({2,2,3}, {-1.f, -3.f, 1.f, 2.f, 2.f, 2.f, 1.f, -3.f, 2.f, -1.f, 2.f, 2.f}),
                 tensor::from<float>({2,3,2}, {3.f, -3.f, 3.f, 1.f, 0.f, 2.f, 3.f, 0.f, -3.f, 2.f, -2.f, -2.f}),
                 tensor::from<float>({2,2}, {-2.f, -2.f, 3.f, -1.f})}, tensor::from<float>({2,2,2}, {24.f, -4.f, -24.f, 0.f, 24.f, 10.f, -39.f, 0.f})});
  cs.push_back({"i,j->ij", {tensor::from<float>({3}, {-3.f, -2.f, -1.f}),
                 tensor::from<float>({4}, {-1.f, -1.f, 3.f, 3.f})}, tensor::from<float>({3,4}, {3.f, 3.f, -9.f, -9.f, 2.f, 2.f, -6.f, -6.f, 1.f, 1.f, -3.f, -3.f})});
  cs.push_back({"i,i->", {tensor::from<float>({5}, {1.f, 3.f, -1.f, -3.f, -2.f}),
                 tensor::from<float>({5}, {-3.f, 3.f, -2.f, 0.f, -2.f})}, tensor::from<float>({}, {12.f})});
  cs.push_back({"ij,ij->ij", {tensor::from<float>({2,3}, {3.f, -2.f, 0.f, 3.f, 0.f, 3.f}),
                 tensor::from<float>({2,3}, {3.f, 2.f, 2.f, 1.f, 1.f, 2.f})}, tensor::from<float>({2,3}, {9.f, -4.f, 0.f, 3.f, 0.f, 6.f})});
  cs.push_back({"ij,ij->ji", {tensor::from<float>({2,3}, {-1.f, 3.f, 3.f, -1.f, -1.f, 2.f}),
                 tensor::from<float>({2,3}, {3.f, -3.f, -3.f, -2.f, 0.f, -2.f})}, tensor::from<float>({3,2}, {-3.f, 2.f, -9.f, 0.f, -9.f, -4.f})});
  cs.push_back({"ij->", {tensor::from<float>({3,4}, {0.f, 0.f, 3.f, 2.f, -2.f, 2.f, 2.f, 1.f, 1.f, -1.f, 2.f, -3.f})}, tensor::from<float>({}, {7.f})});
  cs.push_back({"ii->i", {tensor::from<float>({3,3}, {1.f, 3.f, 3.f, -1.f, -1.f, 1.f, -1.f, 2.f, -2.f})}, tensor::from<float>({3}, {1.f, -1.f, -2.f})});
  cs.push_back({"ii", {tensor::from<float>({3,3}, {-2.f, -3.f, 0.f, -2.f, -1.f, 3.f, 2.f, 2.f, 1.f})}, tensor::from<float>({}, {-2.f})});
  cs.push_back({"ji", {tensor::from<float>({2,3}, {-3.f, 2.f, 1.f, 3.f, 0.f, -2.f})}, tensor::from<float>({3,2}, {-3.f, 3.f, 2.f, 0.f, 1.f, -2.f})});
  cs.push_back({"ab,bc,cd->ad", {tensor::from<float>({2,3}, {1.f, 0.f, 1.f, -1.f, -1.f, -3.f}),
                 tensor::from<float>({3,2}, {3.f, 2.f, 0.f, -2.f, 1.f, -1.f}),
                 tensor::from<float>({2,4}, {1.f, -3.f, -2.f, 2.f, -3.f, 1.f, -1.f, -3.f})}, tensor::from<float>({2,4}, {1.f, -11.f, -9.f, 5.f, -15.f, 21.f, 9.f, -21.f})});
  cs.push_back({"...ij,...jk->...ik", {tensor::from<float>({2,1,2,3}, {2.f, 1.f, 2.f, 3.f, 2.f, 2.f, -3.f, 3.f, 3.f, 1.f, 2.f, 2.f}),
                 tensor::from<float>({3,3,2}, {3.f, 3.f, 0.f, 2.f, 3.f, -1.f, -3.f, -2.f, -3.f, 0.f, -3.f, -2.f, -2.f, 1.f, -2.f, 3.f, -2.f, 3.f})}, tensor::from<float>({2,3,2,2}, {12.f, 6.f, 15.f, 11.f, -15.f, -8.f, -21.f, -10.f, -10.f, 11.f, -14.f, 15.f, 0.f, -6.f, 9.f, 5.f, -9.f, 0.f, -15.f, -6.f, -6.f, 15.f, -10.f, 13.f})});
  cs.push_back({"ij,j->i", {tensor::from<float>({2,3}, {0.f, -2.f, -3.f, -1.f, 1.f, -3.f}),
                 tensor::from<float>({1}, {-2.f})}, tensor::from<float>({2}, {10.f, 6.f})});
  cs.push_back({"iij->j", {tensor::from<float>({2,2,3}, {-3.f, 1.f, -3.f, -3.f, 0.f, -1.f, 0.f, 3.f, 3.f, 0.f, 1.f, 2.f})}, tensor::from<float>({3}, {-3.f, 2.f, -1.f})});
  cs.push_back({"i...,i->...", {tensor::from<float>({3,2,2}, {0.f, 1.f, -2.f, 1.f, -2.f, -2.f, 2.f, 1.f, -1.f, -3.f, -2.f, 2.f}),
                 tensor::from<float>({3}, {0.f, 3.f, 3.f})}, tensor::from<float>({2,2}, {-9.f, -15.f, 0.f, 9.f})});
  cs.push_back({"Ab,aB", {tensor::from<float>({2,3}, {2.f, -3.f, -3.f, 1.f, -1.f, 2.f}),
                 tensor::from<float>({4,2}, {-1.f, -2.f, -3.f, -1.f, 1.f, -3.f, 2.f, -1.f})}, tensor::from<float>({2,2,4,3}, {-2.f, 3.f, 3.f, -6.f, 9.f, 9.f, 2.f, -3.f, -3.f, 4.f, -6.f, -6.f, -4.f, 6.f, 6.f, -2.f, 3.f, 3.f, -6.f, 9.f, 9.f, -2.f, 3.f, 3.f, -1.f, 1.f, -2.f, -3.f, 3.f, -6.f, 1.f, -1.f, 2.f, 2.f, -2.f, 4.f, -2.f, 2.f, -4.f, -1.f, 1.f, -2.f, -3.f, 3.f, -6.f, -1.f, 1.f, -2.f})});
  cs.push_back({"ij,jk", {tensor::from<float>({2,3}, {-1.f, 1.f, 3.f, 0.f, 2.f, -1.f}),
                 tensor::from<float>({3,2}, {-3.f, 2.f, 2.f, 2.f, 3.f, 0.f})}, tensor::from<float>({2,2}, {14.f, 0.f, 1.f, 4.f})});
  cs.push_back({"ij,ik->jk", {tensor::from<float>({3,2}, {-2.f, 1.f, 1.f, -1.f, 1.f, -2.f}),
                 tensor::from<float>({3,2}, {1.f, 2.f, -3.f, 0.f, 1.f, -3.f})}, tensor::from<float>({2,2}, {-4.f, -7.f, 2.f, 8.f})});
  cs.push_back({"bij,jk->bik", {tensor::from<float>({2,2,3}, {1.f, 3.f, 2.f, 1.f, 2.f, -1.f, -1.f, -3.f, 2.f, -1.f, 3.f, 0.f}),
                 tensor::from<float>({3,2}, {3.f, -3.f, -2.f, -1.f, -3.f, 0.f})}, tensor::from<float>({2,2,2}, {-9.f, -6.f, 2.f, -5.f, -3.f, 6.f, -9.f, 0.f})});
  cs.push_back({"ij,jk->ik", {tensor::from<float>({2,0}, {}),
                 tensor::from<float>({0,3}, {})}, tensor::from<float>({2,3}, {0.f, 0.f, 0.f, 0.f, 0.f, 0.f})});
  return cs;
}


std::vector<kernel_input> inputs_of(const std::vector<tensor>& ts) {
  std::vector<kernel_input> r;
  for (const auto& t : ts) r.push_back({t});
  return r;
}
}  // namespace

TEST_CASE("Einsum matches every ONNX backend test case (transpose, sum, batch diagonal, inner product, batch matmul)") {
  const auto cases = einsum_backend_cases();
  CHECK(cases.size() == 5);
  for (const auto& c : cases) check_backend_case<ops::einsum, double>(c, 1e-12);
}

TEST_CASE("Einsum matches numpy.einsum on fast-path, general-path, implicit, diagonal, broadcasting and 3-operand equations") {
  for (const auto& c : einsum_numpy_cases()) {
    CAPTURE(c.eq);
    const tensor y = run1<ops::einsum>(op("Einsum", 12).set("equation", c.eq), inputs_of(c.in));
    check_tensor<float>(y, dims_of(c.out), values_of<float>(c.out), 0, 0);
  }
}

TEST_CASE("Einsum \"nd,kd->nk\" on [1024,64] x [16,64] (Mixed_ops) on a pool of 2 threads matches a plain loop") {
  thread_pool pool(2);
  lcg g(11);
  std::vector<float> a(1024 * 64), b(16 * 64);
  for (auto& v : a) v = g.uniform();
  for (auto& v : b) v = g.uniform();
  const tensor y = run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("nd,kd->nk")),
                                     {{make<float>({1024, 64}, a)}, {make<float>({16, 64}, b)}}, &pool);
  std::vector<float> want(1024 * 16);
  for (std::size_t n = 0; n < 1024; ++n)
    for (std::size_t k = 0; k < 16; ++k) {
      double s = 0;
      for (std::size_t d = 0; d < 64; ++d) s += static_cast<double>(a[n * 64 + d]) * b[k * 64 + d];
      want[n * 16 + k] = static_cast<float>(s);
    }
  check_tensor<float>(y, {1024, 16}, want, 1e-4, 1e-4);
}

TEST_CASE("Einsum on int32 and int64 (matrix product and trace) and on uint8 (general path)") {
  const tensor a = make<std::int32_t>({2, 2}, {1, 2, 3, 4});
  const tensor b = make<std::int32_t>({2, 2}, {5, 6, 7, 8});
  check_tensor<std::int32_t>(run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("ij,jk->ik")), {{a}, {b}}), {2, 2},
                             {19, 22, 43, 50});
  check_tensor<std::int32_t>(run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("ij,kj->ki")), {{a}, {b}}), {2, 2},
                             {17, 39, 23, 53});
  check_tensor<i64>(run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("ii")), {{make<i64>({2, 2}, {1, 2, 3, 4})}}), {}, {5});
  check_tensor<std::uint8_t>(run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("i,i,i->i")),
                                               {{make<std::uint8_t>({2}, {1, 2})}, {make<std::uint8_t>({2}, {3, 4})}, {make<std::uint8_t>({2}, {5, 6})}}),
                             {2}, {15, 48});
}

TEST_CASE("Einsum batched fast path with many batches on a pool of 2 threads (float and double)") {
  thread_pool pool(2);
  lcg g(5);
  const std::size_t B = 24, I = 9, J = 17, K = 11;
  std::vector<float> a(B * I * J), b(B * J * K);
  for (auto& v : a) v = g.uniform();
  for (auto& v : b) v = g.uniform();
  std::vector<float> want(B * K * I);
  for (std::size_t n = 0; n < B; ++n)
    for (std::size_t i = 0; i < I; ++i)
      for (std::size_t k = 0; k < K; ++k) {
        double s = 0;
        for (std::size_t j = 0; j < J; ++j) s += static_cast<double>(a[(n * I + i) * J + j]) * b[(n * J + j) * K + k];
        want[(n * K + k) * I + i] = static_cast<float>(s);
      }
  const tensor y = run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("bij,bjk->bki")),
                                     {{make<float>({24, 9, 17}, a)}, {make<float>({24, 17, 11}, b)}}, &pool);
  check_tensor<float>(y, {24, 11, 9}, want, 1e-5, 1e-4);
  const std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
  const tensor yd = run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("bij,bjk->bki")),
                                      {{make<double>({24, 9, 17}, ad)}, {make<double>({24, 17, 11}, bd)}}, &pool);
  check_tensor<double>(yd, {24, 11, 9}, std::vector<double>(want.begin(), want.end()), 1e-5, 1e-4);
}

TEST_CASE("Einsum errors: term count, rank, sizes, output labels, characters, missing output ellipsis") {
  const tensor m = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const tensor v = make<float>({4}, {1, 2, 3, 4});
  const auto eq = [](const char* e) { return op("Einsum", 12).set("equation", std::string(e)); };
  check_fails<ops::einsum>(eq("ij,jk->ik"), {{m}}, "has 2 input terms but the node has 1 inputs");
  check_fails<ops::einsum>(eq("ijk->i"), {{m}}, "input 0 has rank 2 but its term names 3 dimensions");
  check_fails<ops::einsum>(eq("ij,j->i"), {{m}, {v}}, "label 'j' has size 3 in one input and 4 in input 1");
  check_fails<ops::einsum>(eq("ij->ik"), {{m}}, "output label 'k' does not appear in the inputs");
  check_fails<ops::einsum>(eq("ij->ii"), {{m}}, "output label 'i' appears twice");
  check_fails<ops::einsum>(eq("i1->i"), {{v}}, "unexpected character '1'");
  check_fails<ops::einsum>(eq("..i->i"), {{v}}, "malformed ellipsis");
  check_fails<ops::einsum>(eq("...i->i"), {{m}}, "the output term has no ellipsis");
  check_fails<ops::einsum>(eq("ii->i"), {{m}}, "repeats label 'i' over dimensions of different sizes 2 and 3");
  check_fails<ops::einsum>(op("Einsum", 12), {{m}}, "needs the attribute equation");
}
